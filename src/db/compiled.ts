import type { Compilable, CompiledQuery, QueryResult } from 'kysely';
import type { Executor } from './database.js';
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
 * A multi-row insert of any number of rows, as statements of `block` rows (on PostgreSQL up to
 * POSTGRES_ROWS_PER_STATEMENT) and, for the rest, one statement of up to MAX_COMPILED_ROWS rows or
 * of 64, 32 … rows first (so a change's few rows stay one statement), each compiled once per size
 * as compiledQuery does: a chunk of an import is a handful of prepared statements, never a query
 * built and compiled per call (building a 500-row insert cost Kysely more than SQLite took to run
 * it). `build` takes the flat values of `count` rows, `fields` of each, in order; what the
 * statements return is concatenated.
 */
export function compiledRowInserts<Row>(
  block: number,
  fields: number,
  build: (db: Executor, count: number, ...values: unknown[]) => Compilable<Row>,
): (db: Executor, values: readonly unknown[]) => Promise<Row[]> {
  const run = rowStatements(block, fields, build);
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
export function compiledRowWrites(
  block: number,
  fields: number,
  build: (db: Executor, count: number, ...values: unknown[]) => Compilable<unknown>,
): (db: Executor, values: readonly unknown[]) => Promise<RowsWritten[]> {
  const run = rowStatements(block, fields, build);
  return async (db, values) => {
    const written: RowsWritten[] = [];
    await run(db, values, (result, rows) =>
      written.push({ rows, changes: Number(result.numAffectedRows ?? 0n), lastId: Number(result.insertId ?? 0n) }),
    );
    return written;
  };
}

/** The statements of compiledRowInserts, run one after another, each result handed to `each`. */
function rowStatements<Row>(
  block: number,
  fields: number,
  build: (db: Executor, count: number, ...values: unknown[]) => Compilable<Row>,
): (db: Executor, values: readonly unknown[], each: (result: QueryResult<Row>, rows: number) => void) => Promise<void> {
  const bySize = new Map<number, (db: Executor, params: readonly unknown[]) => Promise<QueryResult<Row>>>();
  const statementOf = (size: number) => {
    let statement = bySize.get(size);
    if (statement === undefined) {
      statement = compiledRunner((executor, ...values) => build(executor, size, ...values));
      bySize.set(size, statement);
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
      each(await statementOf(size)(db, values.slice(start, start + size * fields)), size);
      start += size * fields;
      left -= size;
    }
  };
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
