import type { Selectable, Updateable } from 'kysely';
import { compiledQuery } from './compiled.js';
import type { Database, Executor, Trx } from './database.js';
import { isSqlite } from './dialect.js';

/** Tables whose rows carry a `version` (incremented on every change; ETags derive from it). */
export type VersionedTable = 'users' | 'items' | 'orders' | 'callers' | 'places' | 'webhook_endpoints';

/** Deletes the row if it is still at `version`; true when a row was deleted. */
export async function deleteAtVersion(
  db: Executor,
  table: VersionedTable,
  id: number,
  version: number,
): Promise<boolean> {
  const result = await db.deleteFrom(table).where('id', '=', id).where('version', '=', version).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Writes `changes` to the row if it is still at `version`, moving it to the next version, updated
 * `now`: the row as written, or undefined when it is at another version (or gone).
 */
export async function updateAtVersion<Table extends VersionedTable>(
  db: Executor,
  table: Table,
  id: number,
  version: number,
  changes: Updateable<Database[Table]>,
  now: string,
): Promise<Selectable<Database[Table]> | undefined> {
  // Widened to every versioned table: Kysely types a statement on a table chosen by a type parameter no further.
  const row = await db
    .updateTable(table as VersionedTable)
    .set({ ...changes, version: version + 1, updated_at: now })
    .where('id', '=', id)
    .where('version', '=', version)
    .returningAll()
    .executeTakeFirst();
  return row as Selectable<Database[Table]> | undefined;
}

/** Tables whose rows a write locks before it reads them; stock is keyed by its item. */
export type LockableTable = VersionedTable | 'stock';

/**
 * Each table's lock statement, compiled on its first use (a batch locks up to 1,000 rows, each
 * with it): one entry a LockableTable, so at most seven.
 */
const LOCKS = new Map<LockableTable, (db: Executor, id: number) => Promise<unknown[]>>();

/**
 * Locks the row until the transaction ends, before a write reads it to decide what to write: a
 * change checked against the stored version (If-Match, read-only echoes, a status transition), or
 * a delete checking what refers to the row (placed orders of a user, order lines of an item).
 * On PostgreSQL concurrent transactions run side by side: without the lock, another commit could
 * move the version between this read and this write, and a request that asked for no
 * precondition would fail one. With it they take turns, each seeing the last one's result; a
 * request that adds a reference meanwhile (an order for the user) needs a key-share lock on the
 * row, so it waits too. SQLite needs nothing: a write transaction holds the only write lock from
 * its start.
 */
export async function lockRow(trx: Trx, table: LockableTable, id: number): Promise<void> {
  if (isSqlite(trx)) return;
  let lock = LOCKS.get(table);
  if (lock === undefined) {
    lock = compiledQuery((db, row: number) =>
      table === 'stock'
        ? db.selectFrom('stock').select('item_id').where('item_id', '=', row).forUpdate()
        : db.selectFrom(table).select('id').where('id', '=', row).forUpdate(),
    );
    LOCKS.set(table, lock);
  }
  await lock(trx, id);
}
