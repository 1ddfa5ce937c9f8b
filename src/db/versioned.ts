import type { Executor, Trx } from './database.js';
import { isSqlite } from './dialect.js';

/** Tables whose rows carry a `version` (incremented on every change; ETags derive from it). */
export type VersionedTable = 'users' | 'items' | 'orders' | 'callers' | 'places';

/** Deletes the row if it is still at `version`; true when a row was deleted. */
export async function deleteAtVersion(db: Executor, table: VersionedTable, id: number, version: number): Promise<boolean> {
  const result = await db.deleteFrom(table).where('id', '=', id).where('version', '=', version).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Locks the row until the transaction ends, before a delete checks what refers to it (placed
 * orders of a user, order lines of an item). On PostgreSQL a request that adds such a reference
 * meanwhile (an order) needs a key-share lock on the row: it waits, and then either the check
 * sees its committed reference or its insert finds the row gone (a foreign-key violation,
 * answered 409 concurrent-change). SQLite needs nothing: a write transaction holds the only write
 * lock from its start.
 */
export async function lockForDelete(trx: Trx, table: VersionedTable, id: number): Promise<void> {
  if (!isSqlite(trx)) await trx.selectFrom(table).select('id').where('id', '=', id).forUpdate().execute();
}
