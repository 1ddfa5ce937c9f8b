import type { Compilable, CompiledQuery } from 'kysely';
import type { Executor } from './database.js';

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
  return (db, ...params) => run(db, params);
}

/** compiledQuery's work, with the parameters as one array (a 256-row insert has thousands). */
function compiledRunner<Row>(
  build: (db: Executor, ...params: unknown[]) => Compilable<Row>,
): (db: Executor, params: readonly unknown[]) => Promise<Row[]> {
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
    const result = await db.executeQuery<Row>({ ...compiled, parameters });
    return result.rows;
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
  const byCount = new Map<number, (db: Executor, params: readonly unknown[]) => Promise<Row[]>>();
  return async (db, count, ...params) => {
    if (count > maxCount) return (await db.executeQuery<Row>(build(db, count, ...params).compile())).rows;
    let query = byCount.get(count);
    if (query === undefined) {
      query = compiledRunner((executor, ...values) => build(executor, count, ...values));
      byCount.set(count, query);
    }
    return query(db, params);
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
 * A multi-row insert of any number of rows, as statements of `block` rows and, for the rest, one
 * statement of up to MAX_COMPILED_ROWS rows or of 64, 32 … rows first (so a change's few rows stay
 * one statement), each compiled once per size as compiledQuery does: a
 * chunk of an import is a handful of prepared statements, never a query built and compiled per call
 * (building a 500-row insert cost Kysely more than SQLite took to run it). `build` takes the flat
 * values of `count` rows, `fields` of each, in order; what the statements return is concatenated.
 */
export function compiledRowInserts<Row>(
  block: number,
  fields: number,
  build: (db: Executor, count: number, ...values: unknown[]) => Compilable<Row>,
): (db: Executor, values: readonly unknown[]) => Promise<Row[]> {
  const bySize = new Map<number, (db: Executor, params: readonly unknown[]) => Promise<Row[]>>();
  const statementOf = (size: number) => {
    let statement = bySize.get(size);
    if (statement === undefined) {
      statement = compiledRunner((executor, ...values) => build(executor, size, ...values));
      bySize.set(size, statement);
    }
    return statement;
  };
  return async (db, values) => {
    const rows: Row[] = [];
    let start = 0;
    for (let left = values.length / fields; left > 0;) {
      const size = left >= block ? block : left <= MAX_COMPILED_ROWS ? left : 2 ** Math.floor(Math.log2(left));
      rows.push(...(await statementOf(size)(db, values.slice(start, start + size * fields))));
      start += size * fields;
      left -= size;
    }
    return rows;
  };
}
