import { sql, type SqlBool } from 'kysely';
import { BULK_ROWS_PER_INSERT, compiledKeyLists, compiledRowInserts } from '../db/compiled.js';
import type { Executor } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';
import { WRITERS_LOCK_CLASS } from '../db/prepared-statements.js';
import { timeOfEventId } from './event-ids.js';
import type { EventRow } from '../db/event-tables.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';
import { visibleEvents, type EventSight } from '../db/visibility.js';

/** Where a reader of the outbox stands: after the event at (txid, seq). */
export interface Position {
  txid: number;
  seq: number;
}

export const START: Position = { txid: 0, seq: 0 };

export type NewEvent = Pick<EventRow, 'id' | 'type' | 'resource' | 'path' | 'data' | 'created_by' | 'user_id'>;
const EVENT_FIELDS = [
  'id',
  'type',
  'resource',
  'path',
  'data',
  'created_by',
  'user_id',
] as const satisfies readonly (keyof NewEvent)[];
const EVENT_COLUMNS = ['seq', 'txid', 'id', 'type', 'resource', 'path', 'data', 'created_by', 'user_id'] as const;
/** An event as read, with the time its id carries. */
export type StoredEvent = Omit<EventRow, 'txid'> & { txid: number; created_at: string };

// Multi-row inserts compiled once per size (a change writes one to a few events; an import's chunk hundreds).
const insertRows = compiledRowInserts(BULK_ROWS_PER_INSERT, {
  table: 'events',
  columns: EVENT_FIELDS,
  types: ['text', 'text', 'text', 'text', 'text', 'bigint', 'bigint'],
});

export async function insertEvents(db: Executor, events: NewEvent[]): Promise<void> {
  // One flat array, not an array an event (an import's chunk writes two thousand), in EVENT_FIELDS
  // order, each value read by its name (a loop over the names is a megamorphic load a value).
  const values: unknown[] = [];
  for (const event of events)
    values.push(event.id, event.type, event.resource, event.path, event.data, event.created_by, event.user_id);
  await insertRows(db, values);
}

/**
 * Events no later commit can sort before. On SQLite every committed event (one writer, whose seq
 * follows its commits). On PostgreSQL, events of transactions older than every transaction that
 * was running at the statement's snapshot and may be a rowi writer of this schema: one that holds
 * the writers' lock (taken with its BEGIN, db/prepared-statements.ts) and has a transaction id,
 * since it may still add events with its txid; and one that has ended since the snapshot (the
 * locks are read live, after the snapshot was taken: a writer that committed in between no longer
 * holds the lock, yet its events are not visible to this statement). A transaction with no id yet
 * will get a greater one than any committed. Other running transactions (other schemas and
 * databases, a long report) hold nothing back.
 */
function settled(db: Executor) {
  if (isSqlite(db)) return sql<SqlBool>`1 = 1`;
  return sql<SqlBool>`txid < coalesce((
    select min(running::text::bigint) from pg_snapshot_xip(pg_current_snapshot()) as running
    where running::text::bigint % 4294967296 in (
      select holder.transactionid::text::bigint from pg_locks as writer
      join pg_locks as holder on holder.pid = writer.pid and holder.locktype = 'transactionid'
      where writer.locktype = 'advisory' and writer.classid = ${sql.lit(WRITERS_LOCK_CLASS)}::oid and writer.objid = hashtext(current_schema())::oid
        and writer.objsubid = 2 and writer.database = (select oid from pg_database where datname = current_database())
    ) or pg_xact_status(running) <> 'in progress'
  ), 9223372036854775807)`;
}

/** After the position, in readers' order: seq on SQLite (txid is always 0 there), (txid, seq) on PostgreSQL. */
function afterPosition(db: Executor, position: Position) {
  if (isSqlite(db)) return sql<SqlBool>`seq > ${position.seq}`;
  return sql<SqlBool>`(txid > ${position.txid} or (txid = ${position.txid} and seq > ${position.seq}))`;
}

const inReadersOrder = <Q extends { orderBy(column: 'txid' | 'seq', direction?: 'asc' | 'desc'): Q }>(
  db: Executor,
  query: Q,
  direction: 'asc' | 'desc' = 'asc',
): Q => (isSqlite(db) ? query.orderBy('seq', direction) : query.orderBy('txid', direction).orderBy('seq', direction));

const asStored = (row: EventRow): StoredEvent => ({
  ...row,
  txid: Number(row.txid),
  seq: Number(row.seq),
  // PostgreSQL's bigint arrives as a string.
  created_by: row.created_by === null ? null : Number(row.created_by),
  user_id: row.user_id === null ? null : Number(row.user_id),
  created_at: timeOfEventId(row.id),
});

/** Where a reader stands once it has read this event. */
export function positionOf(event: Pick<StoredEvent, 'txid' | 'seq'>): Position {
  return { txid: event.txid, seq: event.seq };
}

/**
 * Settled events after `position`, in outbox order, at most `limit`, up to `upTo` when given;
 * only of the given resources and types when those are given. (Readers that follow several
 * sights at once, the stream and webhooks, filter each event by record as they take it.)
 */
export async function findEventsAfter(
  db: Executor,
  position: Position,
  options: {
    limit: number;
    upTo?: Position;
    resources?: readonly string[];
    types?: readonly string[];
    withoutData?: boolean;
  },
): Promise<StoredEvent[]> {
  const columns = options.withoutData
    ? EVENT_COLUMNS.map((column) => (column === 'data' ? sql<string>`''`.as('data') : column))
    : EVENT_COLUMNS;
  let query = db
    .selectFrom('events')
    .select(columns as typeof EVENT_COLUMNS)
    .where(settled(db))
    .where(afterPosition(db, position));
  if (options.upTo) query = query.where(sql<SqlBool>`not ${afterPosition(db, options.upTo)}`);
  if (options.resources)
    query = query.where('resource', 'in', options.resources.length > 0 ? [...options.resources] : ['']);
  if (options.types && options.types.length > 0) query = query.where('type', 'in', [...options.types]);
  const rows = await inReadersOrder(db, query).limit(options.limit).execute();
  return rows.map(asStored);
}

/** The position of the newest settled event (START when there is none). */
export async function latestPosition(db: Executor): Promise<Position> {
  const row = await inReadersOrder(db, db.selectFrom('events').select(['txid', 'seq']).where(settled(db)), 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? { txid: Number(row.txid), seq: Number(row.seq) } : START;
}

export async function findEventById(db: Executor, id: string): Promise<StoredEvent | undefined> {
  const row = await db.selectFrom('events').select(EVENT_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row ? asStored(row) : undefined;
}

const selectEventsByIds = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, ids) =>
  db
    .selectFrom('events')
    .select(EVENT_COLUMNS)
    .where('id', 'in', ids as string[]),
);

/** The events of these ids that are still kept (in no order). */
export async function findEventsByIds(db: Executor, ids: readonly string[]): Promise<StoredEvent[]> {
  return (await selectEventsByIds(db, ids)).map(asStored);
}

/** A page of the events the sight shows (of the records the caller sees: db/visibility.ts). */
export async function findEvents(db: Executor, query: ListQuery, sight: EventSight) {
  const page = await fetchPage(db.selectFrom('events').select(EVENT_COLUMNS).where(visibleEvents(sight)), query);
  return { ...page, rows: page.rows.map(asStored) };
}

/** Deletes at most `limit` events with ids below `beforeId` (made before a time: firstEventIdAt), oldest first; answers how many. */
export async function deleteEventsBefore(db: Executor, beforeId: string, limit: number): Promise<number> {
  const oldest = db.selectFrom('events').select('seq').where('id', '<', beforeId).orderBy('id').limit(limit);
  const result = await db.deleteFrom('events').where('seq', 'in', oldest).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * A consumer's cursor, made at the start of the outbox the first time it is asked for: a consumer
 * that starts late still reads every event kept (an event committed before its first round is not
 * skipped).
 */
export async function cursorOf(
  db: Executor,
  name: string,
): Promise<Position & { lease_owner: string | null; lease_until: string | null }> {
  const row = await db.selectFrom('event_cursors').selectAll().where('name', '=', name).executeTakeFirst();
  if (row)
    return { txid: Number(row.txid), seq: Number(row.seq), lease_owner: row.lease_owner, lease_until: row.lease_until };
  await db
    .insertInto('event_cursors')
    .values({ name, txid: START.txid, seq: START.seq, lease_owner: null, lease_until: null })
    .onConflict((conflict) => conflict.column('name').doNothing())
    .execute();
  return cursorOf(db, name);
}

/**
 * Takes or renews the lease of a consumer for `owner` until `until`, when nobody else holds an
 * unexpired one, or the one who does is `gone` (a process known to have died); answers whether
 * `owner` holds it now.
 */
export async function takeLease(
  db: Executor,
  name: string,
  owner: string,
  now: string,
  until: string,
  gone?: string,
): Promise<boolean> {
  await cursorOf(db, name);
  const result = await db
    .updateTable('event_cursors')
    .set({ lease_owner: owner, lease_until: until })
    .where('name', '=', name)
    .where((where) =>
      where.or([
        where('lease_owner', 'is', null),
        where('lease_owner', '=', owner),
        where('lease_until', '<', now),
        ...(gone === undefined ? [] : [where('lease_owner', '=', gone)]),
      ]),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Moves a consumer's cursor, while `owner` holds its lease; answers whether it did. */
export async function moveCursor(db: Executor, name: string, owner: string, position: Position): Promise<boolean> {
  const result = await db
    .updateTable('event_cursors')
    .set({ txid: position.txid, seq: position.seq })
    .where('name', '=', name)
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function releaseLease(db: Executor, name: string, owner: string): Promise<void> {
  await db
    .updateTable('event_cursors')
    .set({ lease_owner: null, lease_until: null })
    .where('name', '=', name)
    .where('lease_owner', '=', owner)
    .execute();
}
