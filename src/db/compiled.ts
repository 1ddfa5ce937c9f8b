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
  const byDialect = new WeakMap<object, { compiled: CompiledQuery<Row>; slots: number[] }>();
  return async (db, ...params) => {
    const { adapter } = db.getExecutor();
    let prepared = byDialect.get(adapter);
    if (prepared === undefined) {
      const placeholders = params.map(() => ({}));
      const compiled = build(db, ...(placeholders as Params)).compile();
      const slots = compiled.parameters.map((parameter) => placeholders.indexOf(parameter as object));
      if (slots.some((slot) => slot === -1) || new Set(slots).size !== params.length) {
        throw new Error('compiledQuery: every parameter must be used as a value in the query');
      }
      prepared = { compiled, slots };
      byDialect.set(adapter, prepared);
    }
    const { compiled, slots } = prepared;
    const result = await db.executeQuery<Row>({ ...compiled, parameters: slots.map((slot) => params[slot]) });
    return result.rows;
  };
}
