import { sql } from 'kysely';
import { metrics, secondsSince } from '../observability/metrics.js';
import type { Db, Trx } from './database.js';

/**
 * What a unit of work that need not be on disk when it resolves runs first: PostgreSQL commits it
 * without waiting for its WAL flush; the SQLite writer takes it as said (sqlite-driver.ts) and
 * commits a group made only of such units without the fsync (group-commit.ts). A crash of the
 * process loses none of it; a power cut may lose what no later flushed commit has written through.
 */
export const FLUSH_LATER = 'set local synchronous_commit = off';

/** `flush: 'later'`: the unit may resolve before it is on disk (the audit trail's batches). */
export interface UnitOptions {
  flush?: 'now' | 'later';
}

/**
 * The one way rowi writes: `work` runs in a transaction, and whatever it wrote is committed
 * whole, or nothing of it is (docs/development.md: transactions and locking). The record of an
 * Idempotency-Key's response and the events of a change (outbox/outbox.ts) are written inside the
 * same transaction as the change they belong to, so they commit or vanish with it.
 *
 * On SQLite the transaction is a unit of a group that commits once for many requests (the writer,
 * group-commit.ts): the promise resolves once that COMMIT is on disk, so what a 2xx acknowledges
 * survives a crash. On PostgreSQL it is a transaction of its own on a pooled connection, and
 * PostgreSQL groups the flushes of concurrent commits itself.
 */
export async function unitOfWork<T>(db: Db, work: (trx: Trx) => Promise<T>, options?: UnitOptions): Promise<T> {
  let unit: Trx | undefined;
  const start = process.hrtime.bigint();
  let result: T;
  try {
    result = await db.transaction().execute(async (trx: Trx) => {
      unit = trx;
      if (options?.flush === 'later') await sql.raw(FLUSH_LATER).execute(trx);
      return work(trx);
    });
  } catch (error) {
    metrics.transactionDuration.observe({ outcome: 'rolled_back' }, secondsSince(start));
    throw error;
  }
  metrics.transactionDuration.observe({ outcome: 'committed' }, secondsSince(start));
  // Whoever waits for committed events (the event feed) is told only now, never of a rollback.
  if (unit?.wroteEvents === true) db.commits.eventsCommitted();
  return result;
}
