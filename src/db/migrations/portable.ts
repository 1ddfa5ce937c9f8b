import { sql, type CreateTableBuilder, type Kysely, type RawBuilder } from 'kysely';
import { isSqlite } from '../dialect.js';

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

/**
 * Text columns compare byte by byte (by code point) on both databases: SQLite's BINARY collation,
 * PostgreSQL's "C". A database created with a linguistic default (en_US.UTF-8) would otherwise
 * sort names differently from SQLite, and more slowly.
 */
export function textType(db: Kysely<unknown>): 'text' | RawBuilder<unknown> {
  return isSqlite(db) ? 'text' : sql`text collate "C"`;
}
