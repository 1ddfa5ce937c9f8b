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
  /**
   * Only the records this caller created (created_by); null: records of every owner. With a user
   * as well, only the records that are both (a token acting for a user never sees more than its
   * caller).
   */
  readonly owner: number | null;
  /**
   * Only the records of this user, the one a token acts for: the user itself (users.id) and its
   * orders (orders.user_id); null: no such limit. It never limits items, which belong to no user.
   */
  readonly user: number | null;
}

/**
 * A table whose records have an owner (created_by, migrations 0013 and 0014): users, items, orders
 * and operations, and the table of any owned resource declared since (declareOwnedTable).
 */
export type OwnedTable = string;

/** What a caller that sees every record sees; also what rowi's own work (not a request) sees. */
export const SEES_ALL: Sight = Object.freeze({ owner: null, user: null });

interface OwnedTableRule {
  /** The column that names a record's user (the one a token acts for); none: its records belong to no user. */
  readonly userColumn?: string;
  /** Whether an event of the table's resource carries its record's owner (outbox.ts ownerOf). */
  readonly eventsCarryOwner: boolean;
}

/**
 * The owned tables: a user is its own user, an order its user_id's, an operation its acting
 * user's; an item belongs to no user. An operation event carries no owner: only callers that see
 * every operation are sent them (auth/policy.ts readableResources).
 */
const OWNED_TABLES = new Map<string, OwnedTableRule>([
  ['users', { userColumn: 'id', eventsCarryOwner: true }],
  ['items', { eventsCarryOwner: true }],
  ['orders', { userColumn: 'user_id', eventsCarryOwner: true }],
  ['operations', { userColumn: 'user_id', eventsCarryOwner: false }],
]);

/**
 * Makes `table` an owned table (its records have created_by), for a resource declared before the
 * app is built; its events carry their record's owner. Returns what undoes it.
 */
export function declareOwnedTable(table: string, rule: { userColumn?: string }): () => void {
  if (OWNED_TABLES.has(table)) throw new Error(`The owned table ${table} is declared already`);
  OWNED_TABLES.set(table, {
    ...(rule.userColumn === undefined ? {} : { userColumn: rule.userColumn }),
    eventsCarryOwner: true,
  });
  return () => {
    OWNED_TABLES.delete(table);
  };
}

/** The rule of an owned table; a table never declared is a programming error. */
function ruleOf(table: OwnedTable): OwnedTableRule {
  const rule = OWNED_TABLES.get(table);
  if (rule === undefined) throw new Error(`${table} is no owned table: declare it with declareOwnedTable`);
  return rule;
}

/** The column of `table` that names a record's user; undefined when its records belong to no user. */
export function userColumnOf(table: OwnedTable): string | undefined {
  return ruleOf(table).userColumn;
}

/**
 * Where an event of `resource` finds its record's owner: the user column, if any (created_by is
 * the owner); undefined when its events carry no owner (no owned table of that name).
 */
export function eventOwnerRuleOf(resource: string): { userColumn?: string } | undefined {
  const rule = OWNED_TABLES.get(resource);
  return rule?.eventsCarryOwner === true ? rule : undefined;
}

interface Limit {
  column: string;
  value: number;
}

/**
 * The columns and values a sight limits `table` by, every one of which a record must match (none:
 * it sees every record of it). A sight that names both an owner and a user (a token acting for a
 * user, whose caller sees only its own records) shows the records that are both.
 */
function limitsOf(table: OwnedTable, sight: Sight): Limit[] {
  const limits: Limit[] = [];
  if (sight.owner !== null) limits.push({ column: 'created_by', value: sight.owner });
  const userColumn = ruleOf(table).userColumn;
  if (sight.user !== null && userColumn !== undefined) limits.push({ column: userColumn, value: sight.user });
  return limits;
}

/** Whether the sight shows a record of `table` read whole (the predicate of visibleIn, on a row in memory). */
export function shows(table: OwnedTable, sight: Sight, row: Readonly<Record<string, unknown>>): boolean {
  for (const limit of limitsOf(table, sight)) if (row[limit.column] !== limit.value) return false;
  return true;
}

/** The columns a row must hold for `shows` to decide on it: its owner and its user, if any. */
export function sightColumnsOf(table: OwnedTable): string[] {
  const userColumn = ruleOf(table).userColumn;
  return userColumn === undefined ? ['created_by'] : ['created_by', userColumn];
}

/**
 * The predicate on the records of `table` (as `alias`, when the query names it so) that the sight
 * shows; undefined when it shows every one.
 */
export function visibleIn(table: OwnedTable, sight: Sight, alias: string = table): RawBuilder<SqlBool> | undefined {
  const limits = limitsOf(table, sight);
  if (limits.length === 0) return undefined;
  return sql<SqlBool>`${sql.join(
    limits.map((limit) => sql`${sql.ref(`${alias}.${limit.column}`)} = ${limit.value}`),
    sql` and `,
  )}`;
}

/**
 * The predicate for a statement compiled once for every kind of sight: `owner` and `user` are
 * parameters that may be null (no limit); items take no `user`. Only where one statement reads
 * several tables at once, or a list of keys whatever the sight.
 */
export function visibleInEither(table: OwnedTable, alias: string, owner: unknown, user?: unknown): RawBuilder<SqlBool> {
  const byOwner = sql<SqlBool>`(cast(${owner} as bigint) is null or ${sql.ref(`${alias}.created_by`)} = ${owner})`;
  const userColumn = ruleOf(table).userColumn;
  if (userColumn === undefined) return byOwner;
  return sql<SqlBool>`${byOwner} and (cast(${user} as bigint) is null or ${sql.ref(`${alias}.${userColumn}`)} = ${user})`;
}

/** The parameters visibleInEither takes for a sight (a table without a user column takes no user). */
export function eitherParameters(table: OwnedTable, sight: Sight): [owner: number | null, user: number | null] {
  return [sight.owner, ruleOf(table).userColumn === undefined ? null : sight.user];
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
 * A read of one record by id, compiled once for each kind of sight (one that sees all, its own
 * records, a user's, or a user's among its own: the owner and user parameters), so a read pays for
 * the predicate no more than a parameter.
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
  const both = compiledQuery((db, id: number, owner: number, user: number) =>
    whereVisible(build(db, id), table, { owner, user }),
  );
  return (db, id, sight) => {
    const [owner, user] = eitherParameters(table, sight);
    if (owner === null) return user === null ? any(db, id) : users(db, id, user);
    return user === null ? own(db, id, owner) : both(db, id, owner, user);
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
  return (
    (records.user === null || event.user_id === records.user) &&
    (records.owner === null || event.created_by === records.owner)
  );
}

/** The predicate on the events table for a sight: the SQL form of eventVisible. */
export function visibleEvents(sight: EventSight): RawBuilder<SqlBool> {
  const terms: RawBuilder<SqlBool>[] = [];
  const every: string[] = [];
  for (const [resource, records] of sight) {
    const limits = [
      ...(records.user === null ? [] : [sql<SqlBool>`user_id = ${records.user}`]),
      ...(records.owner === null ? [] : [sql<SqlBool>`created_by = ${records.owner}`]),
    ];
    if (limits.length === 0) every.push(resource);
    else terms.push(sql<SqlBool>`(resource = ${resource} and ${sql.join(limits, sql` and `)})`);
  }
  if (every.length > 0) terms.unshift(sql<SqlBool>`resource in (${sql.join(every)})`);
  return terms.length === 0 ? sql<SqlBool>`1 = 0` : sql<SqlBool>`(${sql.join(terms, sql` or `)})`;
}

/**
 * The narrower of two sights of the same events, for what outlives one check of access (an open
 * stream): a resource stays only while both show it, limited by what either limits it by; two
 * different limits of one kind (another owner, another user) show nothing of it.
 */
export function narrowerEventSight(current: EventSight, now: EventSight): EventSight {
  const narrowed = new Map<string, Sight>();
  for (const [resource, records] of current) {
    const later = now.get(resource);
    if (later === undefined) continue;
    const owner = narrowerLimit(records.owner, later.owner);
    const user = narrowerLimit(records.user, later.user);
    if (owner !== undefined && user !== undefined) narrowed.set(resource, { owner, user });
  }
  return narrowed;
}

/** The narrower of two limits of one kind (null: none); undefined when they name two different ones. */
function narrowerLimit(current: number | null, now: number | null): number | null | undefined {
  if (current === null) return now;
  if (now === null || now === current) return current;
  return undefined;
}
