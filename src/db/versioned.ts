import type { Executor } from './database.js';

/** Tables whose rows carry a `version` (incremented on every change; ETags derive from it). */
export type VersionedTable = 'users' | 'items' | 'orders' | 'callers';

/** Deletes the row if it is still at `version`; true when a row was deleted. */
export async function deleteAtVersion(db: Executor, table: VersionedTable, id: number, version: number): Promise<boolean> {
  const result = await db.deleteFrom(table).where('id', '=', id).where('version', '=', version).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
