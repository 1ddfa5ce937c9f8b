import { sql, type Compilable, type RawBuilder, type SqlBool } from 'kysely';
import { compiledQuery } from './compiled.js';
import type { Executor } from './database.js';

/**
 * Who may see which record, as the one predicate every query of an owned table composes with
 * (docs/access.md). A Sight is built from the request's principal in one place
 * (auth/visibility.ts); repositories take one wherever they read, change or delete users, items or
 * orders, and turn it into SQL here, never by hand. A record outside the sight is not found: the
 * query that looks for it is the same one index look-up as for an id that does not exist, so the
 * answer (404) and its timing are the same.
 */
export interface Sight {
  /** Only the records this caller created (created_by); null: records of every owner. */
  readonly owner: number | null;
}

/** The tables whose records have an owner (created_by, migrations 0013 and 0014). */
export type OwnedTable = 'users' | 'items' | 'orders' | 'operations';

/** What a caller that sees every record sees; also what rowi's own work (not a request) sees. */
export const SEES_ALL: Sight = Object.freeze({ owner: null });

/** The predicate on `table`'s (or an alias's) created_by; undefined when the sight has no limit. */
export function visibleIn(table: string, sight: Sight): RawBuilder<SqlBool> | undefined {
  return sight.owner === null ? undefined : sql<SqlBool>`${sql.ref(`${table}.created_by`)} = ${sight.owner}`;
}

/**
 * The predicate for a statement compiled once for both kinds of sight: `owner` is a parameter
 * that may be null (every owner). Only where one statement reads several tables at once.
 */
export function visibleInEither(table: string, owner: unknown): RawBuilder<SqlBool> {
  return sql<SqlBool>`(cast(${owner} as bigint) is null or ${sql.ref(`${table}.created_by`)} = ${owner})`;
}

interface Filterable {
  where(expression: RawBuilder<SqlBool>): unknown;
}

/** The query narrowed to the records of `table` that the sight shows. */
export function whereVisible<Query extends Filterable>(query: Query, table: OwnedTable, sight: Sight): Query {
  const predicate = visibleIn(table, sight);
  return predicate === undefined ? query : (query.where(predicate) as Query);
}

/**
 * A read of one record by id, compiled once for a sight that sees all and once for one that sees
 * its own records only (the owner a parameter), so a read pays for the predicate no more than a
 * parameter.
 */
export function compiledVisibleById<Row>(
  table: OwnedTable,
  build: (db: Executor, id: number) => Compilable<Row> & Filterable,
): (db: Executor, id: number, sight: Sight) => Promise<Row[]> {
  const any = compiledQuery((db, id: number) => build(db, id));
  const own = compiledQuery((db, id: number, owner: number) => whereVisible(build(db, id), table, { owner }));
  return (db, id, sight) => (sight.owner === null ? any(db, id) : own(db, id, sight.owner));
}
