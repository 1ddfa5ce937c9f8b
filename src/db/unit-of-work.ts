import { metrics, secondsSince } from '../observability/metrics.js';
import type { Db, Trx } from './database.js';

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
export async function unitOfWork<T>(db: Db, work: (trx: Trx) => Promise<T>): Promise<T> {
  let unit: Trx | undefined;
  const start = process.hrtime.bigint();
  let result: T;
  try {
    result = await db.transaction().execute((trx: Trx) => {
      unit = trx;
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
