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
  /**
   * Only the records of this user, the one a token acts for: the user itself (users.id) and its
   * orders (orders.user_id); null: no such limit. It never limits items, which belong to no user.
   */
  readonly user: number | null;
}

/** The tables whose records have an owner (created_by, migration 0013). */
export type OwnedTable = 'users' | 'items' | 'orders';

/** What a caller that sees every record sees; also what rowi's own work (not a request) sees. */
export const SEES_ALL: Sight = Object.freeze({ owner: null, user: null });

/** The column that names a record's user: a user is its own, an order its user_id's. */
const USER_COLUMN: Partial<Record<OwnedTable, string>> = { users: 'id', orders: 'user_id' };

/** The column and value a sight limits `table` by; undefined when it sees every record of it. */
function limitOf(table: OwnedTable, sight: Sight): { column: string; value: number } | undefined {
  const userColumn = USER_COLUMN[table];
  if (sight.user !== null && userColumn !== undefined) return { column: userColumn, value: sight.user };
  if (sight.owner !== null) return { column: 'created_by', value: sight.owner };
  return undefined;
}

/**
 * The predicate on the records of `table` (as `alias`, when the query names it so) that the sight
 * shows; undefined when it shows every one.
 */
export function visibleIn(table: OwnedTable, sight: Sight, alias: string = table): RawBuilder<SqlBool> | undefined {
  const limit = limitOf(table, sight);
  return limit === undefined ? undefined : sql<SqlBool>`${sql.ref(`${alias}.${limit.column}`)} = ${limit.value}`;
}

/**
 * The predicate for a statement compiled once for every kind of sight: `owner` and `user` are
 * parameters that may be null (no limit); items take no `user`. Only where one statement reads
 * several tables at once.
 */
export function visibleInEither(table: OwnedTable, alias: string, owner: unknown, user?: unknown): RawBuilder<SqlBool> {
  const byOwner = sql<SqlBool>`(cast(${owner} as bigint) is null or ${sql.ref(`${alias}.created_by`)} = ${owner})`;
  const userColumn = USER_COLUMN[table];
  if (userColumn === undefined) return byOwner;
  return sql<SqlBool>`${byOwner} and (cast(${user} as bigint) is null or ${sql.ref(`${alias}.${userColumn}`)} = ${user})`;
}

/** The parameters visibleInEither takes for a sight (a user sight sets no owner: see limitOf). */
export function eitherParameters(table: OwnedTable, sight: Sight): [owner: number | null, user: number | null] {
  const limit = limitOf(table, sight);
  if (limit === undefined) return [null, null];
  return limit.column === 'created_by' ? [limit.value, null] : [null, limit.value];
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
 * A read of one record by id, compiled once for a sight that sees all, once for one that sees its
 * own records only and once for one that sees a user's (the owner or user a parameter), so a read
 * pays for the predicate no more than a parameter.
 */
export function compiledVisibleById<Row>(
  table: OwnedTable,
  build: (db: Executor, id: number) => Compilable<Row> & Filterable,
): (db: Executor, id: number, sight: Sight) => Promise<Row[]> {
  const any = compiledQuery((db, id: number) => build(db, id));
  const own = compiledQuery((db, id: number, owner: number) =>
    whereVisible(build(db, id), table, { owner, user: null }),
  );
  const users = compiledQuery((db, id: number, user: number) =>
    whereVisible(build(db, id), table, { owner: null, user }),
  );
  return (db, id, sight) => {
    const limit = limitOf(table, sight);
    if (limit === undefined) return any(db, id);
    return limit.column === 'created_by' ? own(db, id, limit.value) : users(db, id, limit.value);
  };
}

/**
 * Which events a request sees (docs/access.md "Events"): by resource, the records whose events it
 * sees (SEES_ALL: every event of the resource). A resource absent from the map: none of its events.
 */
export type EventSight = ReadonlyMap<string, Sight>;

/** Whose record an event tells of, as the outbox stores it (migration 0016). */
export interface EventOwner {
  /** The record's owner (its created_by), null when it has none or the event is of no owned record. */
  created_by: number | null;
  /** The user the record belongs to: the user itself, an order's user; null otherwise. */
  user_id: number | null;
}

/** Whether the sight shows the event, which is of `resource` and tells of a record of `owner`. */
export function eventVisible(sight: EventSight, event: EventOwner & { resource: string }): boolean {
  const records = sight.get(event.resource);
  if (records === undefined) return false;
  if (records.user !== null) return event.user_id === records.user;
  if (records.owner !== null) return event.created_by === records.owner;
  return true;
}

/** The predicate on the events table for a sight: the SQL form of eventVisible. */
export function visibleEvents(sight: EventSight): RawBuilder<SqlBool> {
  const terms: RawBuilder<SqlBool>[] = [];
  const every: string[] = [];
  for (const [resource, records] of sight) {
    if (records.user !== null) terms.push(sql<SqlBool>`(resource = ${resource} and user_id = ${records.user})`);
    else if (records.owner !== null)
      terms.push(sql<SqlBool>`(resource = ${resource} and created_by = ${records.owner})`);
    else every.push(resource);
  }
  if (every.length > 0) terms.unshift(sql<SqlBool>`resource in (${sql.join(every)})`);
  return terms.length === 0 ? sql<SqlBool>`1 = 0` : sql<SqlBool>`(${sql.join(terms, sql` or `)})`;
}

/**
 * The narrower of two sights of the same events, for what outlives one check of access (an open
 * stream): a resource stays only while both show it, with the narrower records; two different
 * limits (another owner, another user) show nothing of it.
 */
export function narrowerEventSight(current: EventSight, now: EventSight): EventSight {
  const narrowed = new Map<string, Sight>();
  for (const [resource, records] of current) {
    const later = now.get(resource);
    if (later === undefined) continue;
    if (later.owner === null && later.user === null) narrowed.set(resource, records);
    else if (records.owner === null && records.user === null) narrowed.set(resource, later);
    else if (records.owner === later.owner && records.user === later.user) narrowed.set(resource, records);
  }
  return narrowed;
}
