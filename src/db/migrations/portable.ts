import { SqliteAdapter, type CreateTableBuilder, type Kysely } from 'kysely';

/** True when the migration runs on SQLite; the few DDL differences branch on it. */
export function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * The server-assigned integer key. On SQLite, AUTOINCREMENT guarantees that the id of a deleted
 * record is never handed out again (a URL never comes to name a different record); PostgreSQL
 * identity columns never reuse values either.
 */
export function addIdColumn<T extends string>(db: Kysely<unknown>, table: CreateTableBuilder<T>) {
  return isSqlite(db)
    ? table.addColumn('id', 'integer', (column) => column.primaryKey().autoIncrement())
    : table.addColumn('id', 'bigint', (column) => column.primaryKey().generatedByDefaultAsIdentity());
}
