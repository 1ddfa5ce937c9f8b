import { sql, type CreateTableBuilder, type Kysely, type RawBuilder } from 'kysely';

/** A column's type as addColumn takes it: a name ('integer') or an expression (textType). */
type ColumnType = Parameters<CreateTableBuilder<string>['addColumn']>[1];
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

/** Creates a table whose rows are numbered by the server (addIdColumn); its other columns follow the id. */
export function createIdTable<T extends string>(db: Kysely<unknown>, name: T) {
  return addIdColumn(db, db.schema.createTable(name));
}

/** Adds NOT NULL columns of one type, in the order named; for `$call`, beside the table's other columns. */
export function required(type: ColumnType, names: readonly string[]) {
  return <T extends string, C extends string>(table: CreateTableBuilder<T, C>) =>
    names.reduce<CreateTableBuilder<T, string>>(
      (built, name) => built.addColumn(name, type, (column) => column.notNull()),
      table,
    );
}

/**
 * Text columns compare byte by byte (by code point) on both databases: SQLite's BINARY collation,
 * PostgreSQL's "C". A database created with a linguistic default (en_US.UTF-8) would otherwise
 * sort names differently from SQLite, and more slowly.
 */
export function textType(db: Kysely<unknown>): 'text' | RawBuilder<unknown> {
  return isSqlite(db) ? 'text' : sql`text collate "C"`;
}

/**
 * The columns of a record written at a version (db/versioned.ts): the version, from 1, and when
 * the record was made and last changed.
 */
export function addVersionColumns<T extends string>(db: Kysely<unknown>, table: CreateTableBuilder<T>) {
  const text = textType(db);
  return table
    .addColumn('version', 'integer', (column) => column.notNull().defaultTo(1))
    .addColumn('created_at', text, (column) => column.notNull())
    .addColumn('updated_at', text, (column) => column.notNull());
}

/**
 * Keyset paging sorts by a field and then by id: for each field named, in that order, the index
 * `<table>_<field>_id` on (field, id) that serves it.
 */
export async function createSortIndexes(db: Kysely<unknown>, table: string, fields: readonly string[]): Promise<void> {
  for (const field of fields)
    await db.schema.createIndex(`${table}_${field}_id`).on(table).columns([field, 'id']).execute();
}
