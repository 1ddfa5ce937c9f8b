import {
  sql,
  type Compilable,
  type CompiledQuery,
  type InsertQueryBuilder,
  type InsertResult,
  type QueryResult,
  type RawBuilder,
  type SqlBool,
} from 'kysely';
import type { Database, Executor } from './database.js';
import { isSqlite } from './dialect.js';

/**
 * A query that is built and compiled by Kysely once per dialect, then run with new parameters.
 * Building and compiling a query costs more than SQLite takes to answer a read by key, so the
 * hottest reads use this; they stay ordinary Kysely queries, portable between SQLite and
 * PostgreSQL. The builder is called once with placeholder objects instead of values; each
 * placeholder's position among the compiled parameters tells where the real values go.
 */
export function compiledQuery<Params extends unknown[], Row>(
  build: (db: Executor, ...params: Params) => Compilable<Row>,
): (db: Executor, ...params: Params) => Promise<Row[]> {
  const run = compiledRunner(build as (db: Executor, ...params: unknown[]) => Compilable<Row>);
  return async (db, ...params) => (await run(db, params)).rows;
}

/** compiledQuery's work, with the parameters as one array (a 256-row insert has thousands), and the whole result. */
function compiledRunner<Row>(
  build: (db: Executor, ...params: unknown[]) => Compilable<Row>,
): (db: Executor, params: readonly unknown[]) => Promise<QueryResult<Row>> {
  const byDialect = new WeakMap<object, { compiled: CompiledQuery<Row>; slots: number[]; inOrder: boolean }>();
  return async (db, params) => {
    const { adapter } = db.getExecutor();
    let prepared = byDialect.get(adapter);
    if (prepared === undefined) {
      const placeholders = params.map(() => ({}));
      const compiled = build(db, ...placeholders).compile();
      // A map, not indexOf: a 256-row insert has thousands of parameters.
      const slotOf = new Map<unknown, number>(placeholders.map((placeholder, index) => [placeholder, index]));
      const slots = compiled.parameters.map((parameter) => slotOf.get(parameter) ?? -1);
      if (slots.some((slot) => slot === -1) || new Set(slots).size !== params.length) {
        throw new Error('compiledQuery: every parameter must be used as a value in the query');
      }
      // Each parameter used once, in order (a multi-row insert): the values go as they are.
      const inOrder = slots.length === params.length && slots.every((slot, index) => slot === index);
      prepared = { compiled, slots, inOrder };
      byDialect.set(adapter, prepared);
    }
    const { compiled, slots, inOrder } = prepared;
    const parameters = inOrder ? params : slots.map((slot) => params[slot]);
    return db.executeQuery<Row>({ ...compiled, parameters });
  };
}

/** Multi-row statements are compiled for up to this many rows; more are built per call. */
export const MAX_COMPILED_ROWS = 32;

/**
 * A query whose shape depends on a count (the rows of a multi-row insert, the values of an IN
 * list), compiled once per count up to `maxCount` as compiledQuery does, and built per call
 * beyond it. `build` takes the flat list of parameters of that many rows or values; the caller
 * passes the count first.
 */
export function compiledPerCount<Row>(
  maxCount: number,
  build: (db: Executor, count: number, ...params: unknown[]) => Compilable<Row>,
): (db: Executor, count: number, ...params: unknown[]) => Promise<Row[]> {
  const byCount = new Map<number, (db: Executor, params: readonly unknown[]) => Promise<QueryResult<Row>>>();
  return async (db, count, ...params) => {
    if (count > maxCount) return (await db.executeQuery<Row>(build(db, count, ...params).compile())).rows;
    let query = byCount.get(count);
    if (query === undefined) {
      query = compiledRunner((executor, ...values) => build(executor, count, ...values));
      byCount.set(count, query);
    }
    return (await query(db, params)).rows;
  };
}

/** `values` cut into rows of `fields`, in order: the rows of a compiled multi-row insert. */
export function rowsOf<T>(values: readonly unknown[], fields: readonly (keyof T)[]): T[] {
  const rows: T[] = [];
  for (let start = 0; start < values.length; start += fields.length) {
    const row: Partial<T> = {};
    fields.forEach((field, index) => {
      row[field] = values[start + index] as T[keyof T];
    });
    rows.push(row as T);
  }
  return rows;
}

/** Rows of one statement of compiledRowInserts where a chunk writes hundreds (an import's). */
export const BULK_ROWS_PER_INSERT = 128;
/**
 * On PostgreSQL a statement does not hold the event loop, so compiledRowInserts and
 * compiledKeyLists make statements of up to this many rows or keys there: fewer round trips. A
 * statement takes at most 65,535 parameters.
 */
const POSTGRES_ROWS_PER_STATEMENT = 1024;
const POSTGRES_MAX_PARAMETERS = 65_535;

/**
 * The table a multi-row insert writes, the columns of each row's values in order, and each
 * column's type on PostgreSQL (the values a statement's rows share are cast to it there: below).
 */
export interface RowsInto<T extends keyof Database & string> {
  table: T;
  columns: readonly (keyof Database[T] & string)[];
  types: readonly string[];
}

/** What a multi-row insert adds to its rows (a conflict rule, what it returns). */
type FinishInsert<T extends keyof Database & string, Row> = (
  insert: InsertQueryBuilder<Database, T, InsertResult>,
) => Compilable<Row>;

/**
 * Rows a statement must have before the values they all share are bound once (below), and then
 * only in statements of a power of two rows (those of 16 to 32 rows are compiled per count): fewer
 * rows gain little, and each size and set of shared columns is a statement text of its own.
 */
const SHARED_FROM_ROWS = 16;
/** Sets of shared columns compiled per table and statement size, at most. */
const SHARED_SHAPES_PER_SIZE = 4;
/**
 * Statements that bind shared values once, at most, in a thread (the serving thread and the import
 * thread each load this module, and each has its own pool): on PostgreSQL each text is prepared on
 * every connection, and a pool prepares MAX_PREPARED_STATEMENTS texts at most
 * (db/prepared-statements.ts), which the rest of rowi's statements need. Past either bound rows go
 * as plain rows, which is slower, never wrong.
 */
const SHARED_STATEMENTS_AT_MOST = 48;
let sharedStatements = 0;

/** The statements compiled so far that bind shared values once (tests see which form ran). */
export const sharedStatementCount = (): number => sharedStatements;

/**
 * A multi-row insert of any number of rows, as statements of `block` rows (on PostgreSQL up to
 * POSTGRES_ROWS_PER_STATEMENT) and, for the rest, one statement of up to MAX_COMPILED_ROWS rows or
 * of 64, 32 … rows first (so a change's few rows stay one statement), each compiled once per size
 * as compiledQuery does: a chunk of an import is a handful of prepared statements, never a query
 * built and compiled per call (building a 500-row insert cost Kysely more than SQLite took to run
 * it). `values` are the rows' values, row after row, in `into.columns` order; what the statements
 * return is concatenated.
 *
 * Where every row of a statement of a power of two rows, 16 or more, has the same value in a
 * column (an import's rows share their owner, their time, their audit record's caller), that value
 * is bound once:
 * `insert into t (a, b, c) select ?, ?, column1 from (values (?), (?) …)`, compiled once per size
 * and set of shared columns. Binding a value (the driver converting it, SQLite copying it) costs
 * more than SQLite's reading it from a VALUES list: a 128-row insert of an import's audit records
 * (two of their fourteen values their own) costs 0.6× the CPU this way.
 */
export function compiledRowInserts<T extends keyof Database & string, Row = never>(
  block: number,
  into: RowsInto<T>,
  finish: FinishInsert<T, Row> = (insert) => insert as unknown as Compilable<Row>,
): (db: Executor, values: readonly unknown[]) => Promise<Row[]> {
  const run = rowStatements(block, into, finish);
  return async (db, values) => {
    const rows: Row[] = [];
    await run(db, values, (result) => rows.push(...result.rows));
    return rows;
  };
}

/** What one statement of compiledRowWrites did. */
export interface RowsWritten {
  /** The rows the statement was given. */
  rows: number;
  /** The rows it inserted or changed. */
  changes: number;
  /** SQLite: the rowid of the last row it inserted (one writer: a statement's new rowids are consecutive). */
  lastId: number;
}

/**
 * compiledRowInserts for statements that return no rows, with what each did instead (its count of
 * changes and, on SQLite, the last rowid it inserted): on SQLite a statement's new rows take
 * consecutive ids (AUTOINCREMENT, one writer), so its ids are known without RETURNING, which makes
 * SQLite keep every row of the statement aside before handing them back.
 */
export function compiledRowWrites<T extends keyof Database & string>(
  block: number,
  into: RowsInto<T>,
): (db: Executor, values: readonly unknown[]) => Promise<RowsWritten[]> {
  const run = rowStatements(block, into, (insert) => insert);
  return async (db, values) => {
    const written: RowsWritten[] = [];
    await run(db, values, (result, rows) =>
      written.push({ rows, changes: Number(result.numAffectedRows ?? 0n), lastId: Number(result.insertId ?? 0n) }),
    );
    return written;
  };
}

/** The statements of compiledRowInserts, run one after another, each result handed to `each`. */
function rowStatements<T extends keyof Database & string, Row>(
  block: number,
  into: RowsInto<T>,
  finish: FinishInsert<T, Row>,
): (db: Executor, values: readonly unknown[], each: (result: QueryResult<Row>, rows: number) => void) => Promise<void> {
  const fields = into.columns.length;
  if (into.types.length !== fields) throw new Error(`${into.table}: a type for each of the ${fields} columns`);
  const statements = new Map<string, (db: Executor, params: readonly unknown[]) => Promise<QueryResult<Row>>>();
  const shapesBySize = new Map<number, number>();
  const statementOf = (size: number, shared: number) => {
    const key = `${size}/${shared}`;
    let statement = statements.get(key);
    if (statement === undefined) {
      statement = compiledRunner((executor, ...values) => finish(rowsInsert(executor, into, size, shared, values)));
      statements.set(key, statement);
      if (shared !== 0) {
        shapesBySize.set(size, (shapesBySize.get(size) ?? 0) + 1);
        sharedStatements++;
      }
    }
    return statement;
  };
  return async (db, values, each) => {
    let start = 0;
    const most = isSqlite(db)
      ? block
      : Math.min(POSTGRES_ROWS_PER_STATEMENT, Math.floor(POSTGRES_MAX_PARAMETERS / fields));
    for (let left = values.length / fields; left > 0;) {
      const size = left >= most ? most : left <= MAX_COMPILED_ROWS ? left : 2 ** Math.floor(Math.log2(left));
      const end = start + size * fields;
      const sharing = size >= SHARED_FROM_ROWS && (size & (size - 1)) === 0;
      let shared = sharing ? sharedColumns(values, fields, start, end) : 0;
      if (
        shared !== 0 &&
        !statements.has(`${size}/${shared}`) &&
        ((shapesBySize.get(size) ?? 0) >= SHARED_SHAPES_PER_SIZE || sharedStatements >= SHARED_STATEMENTS_AT_MOST)
      )
        shared = 0;
      const params = shared === 0 ? values.slice(start, end) : sharingParams(values, fields, start, end, shared);
      each(await statementOf(size, shared)(db, params), size);
      start = end;
      left -= size;
    }
  };
}

/**
 * The columns (a bit each) in which every row of `values[start, end)` has the first row's value;
 * never all of them (a VALUES row needs one value).
 */
function sharedColumns(values: readonly unknown[], fields: number, start: number, end: number): number {
  let shared = 0;
  for (let column = 0; column < fields; column++) {
    const first = values[start + column];
    let at = start + fields + column;
    while (at < end && values[at] === first) at += fields;
    if (at >= end) shared |= 1 << column;
  }
  return shared === 2 ** fields - 1 ? shared & ~1 : shared;
}

/** The parameters of a sharing statement: the shared values, then each row's own, in column order. */
function sharingParams(values: readonly unknown[], fields: number, start: number, end: number, shared: number) {
  const params: unknown[] = [];
  for (let column = 0; column < fields; column++) if (shared & (1 << column)) params.push(values[start + column]);
  for (let row = start; row < end; row += fields)
    for (let column = 0; column < fields; column++) if (!(shared & (1 << column))) params.push(values[row + column]);
  return params;
}

/**
 * The insert of `count` rows: `insert … values` when no column is shared, else
 * `insert … select <shared values and VALUES columns> from (values …)`. A VALUES list's columns are
 * column1, column2 … on both databases; on PostgreSQL its parameters have no type (they would be
 * text), so the shared values and the first row's are cast to their columns' types.
 */
function rowsInsert<T extends keyof Database & string>(
  db: Executor,
  into: RowsInto<T>,
  count: number,
  shared: number,
  values: readonly unknown[],
): InsertQueryBuilder<Database, T, InsertResult> {
  const { table, columns, types } = into;
  const insert = db.insertInto(table);
  if (shared === 0) return insert.values(rowsOf(values, columns as never) as never);
  const typed = !isSqlite(db);
  const value = (parameter: unknown, column: number, cast: boolean) =>
    cast ? sql`cast(${parameter} as ${sql.raw(types[column]!)})` : sql`${parameter}`;
  let next = 0;
  const selections: RawBuilder<unknown>[] = [];
  const own: number[] = [];
  columns.forEach((_, column) => {
    if (shared & (1 << column)) selections.push(value(values[next++], column, typed));
    else {
      own.push(column);
      selections.push(sql.ref(`shared_rows.column${own.length}`));
    }
  });
  const rows: RawBuilder<unknown>[] = [];
  for (let row = 0; row < count; row++)
    rows.push(sql`(${sql.join(own.map((column) => value(values[next++], column, typed && row === 0)))})`);
  const select = db
    .selectFrom(sql`(values ${sql.join(rows)})`.as('shared_rows'))
    .select(selections.map((selection, column) => selection.as(columns[column]!)))
    // SQLite reads `on conflict` after a bare `from (…)` as a join's constraint: a WHERE ends the select.
    .where(sql<SqlBool>`true`);
  return insert.columns(columns as never).expression(select as never);
}

/**
 * A query on a list of keys (`where … in (…)`, the keys of an import's chunk) of any length, as
 * statements of `block` keys (on PostgreSQL up to POSTGRES_ROWS_PER_STATEMENT) and, for the rest,
 * one of the next power of two, the list padded with its last key (a key twice in an IN list
 * matches its rows once), each compiled once per size as compiledQuery does: a 500-key IN list
 * built per call costs Kysely more than SQLite takes to answer it. `build` takes the keys, and the
 * other values of the query after them (the same for every statement); what the statements return
 * is concatenated.
 */
export function compiledKeyLists<Row, Extra extends unknown[] = []>(
  block: number,
  build: (db: Executor, keys: unknown[], ...extra: Extra) => Compilable<Row>,
): (db: Executor, keys: readonly unknown[], ...extra: Extra) => Promise<Row[]> {
  const bySize = new Map<number, (db: Executor, params: readonly unknown[]) => Promise<QueryResult<Row>>>();
  return async (db, keys, ...extra) => {
    const rows: Row[] = [];
    const most = isSqlite(db) ? block : POSTGRES_ROWS_PER_STATEMENT;
    for (let start = 0; start < keys.length; start += most) {
      const slice = keys.slice(start, start + most);
      const size = slice.length === most ? most : Math.min(most, 2 ** Math.ceil(Math.log2(slice.length)));
      while (slice.length < size) slice.push(slice[slice.length - 1]);
      let statement = bySize.get(size);
      if (statement === undefined) {
        statement = compiledRunner((executor, ...values) =>
          build(executor, values.slice(0, size), ...(values.slice(size) as Extra)),
        );
        bySize.set(size, statement);
      }
      rows.push(...(await statement(db, [...slice, ...extra])).rows);
    }
    return rows;
  };
}
