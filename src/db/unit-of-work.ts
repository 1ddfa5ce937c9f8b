import type { Db, Trx } from './database.js';

/**
 * The one way rowi writes: `work` runs in a transaction, and whatever it wrote is committed
 * whole, or nothing of it is (README "Development": transactions and locking). The record of an
 * Idempotency-Key's response and, later, the events of a change are written inside the same
 * transaction as the change they belong to, so they commit or vanish with it.
 *
 * On SQLite the transaction is a unit of a group that commits once for many requests (the writer,
 * group-commit.ts): the promise resolves once that COMMIT is on disk, so what a 2xx acknowledges
 * survives a crash. On PostgreSQL it is a transaction of its own on a pooled connection, and
 * PostgreSQL groups the flushes of concurrent commits itself.
 */
export function unitOfWork<T>(db: Db, work: (trx: Trx) => Promise<T>): Promise<T> {
  return db.transaction().execute(work);
}
