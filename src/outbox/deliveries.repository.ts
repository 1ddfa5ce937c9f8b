import { sql, type SqlBool } from 'kysely';
import type { Executor } from '../db/database.js';
import type { WebhookAttemptRow, WebhookDeliveryRow } from '../db/event-tables.js';
import { BULK_ROWS_PER_INSERT, compiledKeyLists, compiledRowInserts } from '../db/compiled.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';

export type StoredDelivery = WebhookDeliveryRow;
export type StoredAttempt = WebhookAttemptRow;
export type NewDelivery = Omit<StoredDelivery, 'id'>;

export function findDeliveryById(db: Executor, endpointId: number, id: number): Promise<StoredDelivery | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', id)
    .where('endpoint_id', '=', endpointId)
    .executeTakeFirst();
}

export function findDeliveries(db: Executor, endpointId: number, query: ListQuery) {
  return fetchPage(db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpointId), query);
}

export function findAttempts(db: Executor, deliveryIds: number[]): Promise<StoredAttempt[]> {
  if (deliveryIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', 'in', deliveryIds)
    .orderBy('delivery_id')
    .orderBy('id')
    .execute();
}

/**
 * `status = 'pending'` with the value in the SQL: only then may the databases read the partial
 * indexes of pending deliveries (migration 0015), which a bound parameter does not let them prove.
 */
const PENDING = sql<SqlBool>`status = 'pending'`;

const NEW_DELIVERY_FIELDS = [
  'endpoint_id',
  'event_id',
  'event_type',
  'resource_key',
  'sequence',
  'status',
  'attempts',
  'next_attempt_at',
  'lease_until',
  'claimed_by',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof NewDelivery)[];

// The dispatcher's statements run every round with hundreds of rows or ids: compiled once per size
// (db/compiled.ts), never built per call; each returns only what its caller reads.
const insertDeliveryRows = compiledRowInserts(
  BULK_ROWS_PER_INSERT,
  {
    table: 'webhook_deliveries',
    columns: NEW_DELIVERY_FIELDS,
    types: ['bigint', 'text', 'text', 'text', 'bigint', 'text', 'integer', 'text', 'text', 'text', 'text', 'text'],
  },
  (insert) => insert.returning(['id', 'endpoint_id', 'event_id']),
);

/** Inserts deliveries (at most one of an event to an endpoint); answers them as stored, in the order given. */
export async function insertDeliveries(db: Executor, deliveries: NewDelivery[]): Promise<StoredDelivery[]> {
  const values: unknown[] = [];
  for (const delivery of deliveries) for (const field of NEW_DELIVERY_FIELDS) values.push(delivery[field]);
  const ids = new Map<string, number>();
  for (const row of await insertDeliveryRows(db, values)) ids.set(`${row.endpoint_id} ${row.event_id}`, Number(row.id));
  return deliveries.map((delivery) => ({ ...delivery, id: ids.get(`${delivery.endpoint_id} ${delivery.event_id}`)! }));
}

/**
 * Gives each new delivery its sequence: its place among the deliveries of its resource to its
 * endpoint (1, 2, 3…), counted in webhook_sequences. In the unit of work that inserts them, in
 * the order they are given (the outbox's); only the fan-out and a ping give sequences, the one
 * under the dispatcher's lease, the other to a resource of its own (the endpoint).
 */
export async function assignSequences(db: Executor, deliveries: NewDelivery[]): Promise<void> {
  if (deliveries.length === 0) return;
  if (deliveries.length === 1) {
    // One (a ping, made by any process at any time): counted in one statement, so that two at once get two numbers.
    const delivery = deliveries[0]!;
    const row = await db
      .insertInto('webhook_sequences')
      .values({ endpoint_id: delivery.endpoint_id, resource_key: delivery.resource_key!, last: 1 })
      .onConflict((conflict) =>
        conflict
          .columns(['endpoint_id', 'resource_key'])
          .doUpdateSet((eb) => ({ last: eb(eb.ref('webhook_sequences.last'), '+', 1) })),
      )
      .returning('last')
      .executeTakeFirstOrThrow();
    delivery.sequence = Number(row.last);
    return;
  }
  const last = new Map<string, number>();
  const keyOf = (endpointId: number, resource: string) => `${endpointId} ${resource}`;
  const byEndpoint = new Map<number, Set<string>>();
  for (const delivery of deliveries) {
    const resources = byEndpoint.get(delivery.endpoint_id) ?? new Set<string>();
    byEndpoint.set(delivery.endpoint_id, resources.add(delivery.resource_key!));
  }
  for (const [endpointId, resources] of byEndpoint)
    for (const row of await selectSequences(db, [...resources], endpointId))
      last.set(keyOf(endpointId, row.resource_key), Number(row.last));
  const touched = new Map<string, { endpoint_id: number; resource_key: string; last: number }>();
  for (const delivery of deliveries) {
    const key = keyOf(delivery.endpoint_id, delivery.resource_key!);
    const next = (last.get(key) ?? 0) + 1;
    last.set(key, next);
    delivery.sequence = next;
    touched.set(key, { endpoint_id: delivery.endpoint_id, resource_key: delivery.resource_key!, last: next });
  }
  const values: unknown[] = [];
  for (const row of touched.values()) values.push(row.endpoint_id, row.resource_key, row.last);
  await upsertSequenceRows(db, values);
}

const selectSequences = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, resources, endpointId: unknown) =>
  db
    .selectFrom('webhook_sequences')
    .select(['resource_key', 'last'])
    .where('endpoint_id', '=', endpointId as number)
    .where('resource_key', 'in', resources as string[]),
);

const SEQUENCE_FIELDS = ['endpoint_id', 'resource_key', 'last'] as const;
const upsertSequenceRows = compiledRowInserts(
  BULK_ROWS_PER_INSERT,
  { table: 'webhook_sequences', columns: SEQUENCE_FIELDS, types: ['bigint', 'text', 'bigint'] },
  (insert) =>
    insert.onConflict((conflict) =>
      conflict.columns(['endpoint_id', 'resource_key']).doUpdateSet((eb) => ({ last: eb.ref('excluded.last') })),
    ),
);

/** The earliest next attempt of any pending delivery of an enabled endpoint (undefined when none). */
export async function nextAttemptAt(db: Executor): Promise<string | undefined> {
  const row = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select((eb) => eb.fn.min('d.next_attempt_at').as('next'))
    .where('e.enabled', '=', 1)
    .where('d.status', '=', 'pending')
    .where(sql<SqlBool>`(d.lease_until is null or d.lease_until < ${new Date().toISOString()})`)
    .executeTakeFirst();
  return row?.next ?? undefined;
}

/**
 * A delivery that may be claimed: not claimed, or its claim ran out, or claimed by `owner` itself.
 * The last is a claim whose commit this process did not see (the connection lost as it committed):
 * the dispatcher skips what it holds in memory, and takes the rest up again at once instead of
 * after the claim's time-out.
 */
const claimable = (now: string, owner: string) =>
  sql<SqlBool>`(lease_until is null or lease_until < ${now} or claimed_by = ${owner})`;

/**
 * Up to `limit` pending deliveries of an endpoint that are due and that nobody holds, soonest due
 * first (then oldest): read through the index of pending deliveries by due time, so deliveries
 * waiting for a retry later are not read at all. Those `owner` claimed itself are among them only
 * when asked (`ownClaims`: a dispatcher that may hold claims it does not know of); else a
 * dispatcher under a backlog would read again, every round, what it holds already.
 */
export function findDue(
  db: Executor,
  endpointId: number,
  now: string,
  limit: number,
  owner: string,
  ownClaims: boolean,
): Promise<StoredDelivery[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where(PENDING)
    .where('next_attempt_at', '<=', now)
    .where(ownClaims ? claimable(now, owner) : sql<SqlBool>`(lease_until is null or lease_until < ${now})`)
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}

const selectPendingBefore = compiledKeyLists(
  BULK_ROWS_PER_INSERT,
  (db, resources, endpointId: unknown, beforeId: unknown) =>
    db
      .selectFrom('webhook_deliveries')
      .select(['id', 'resource_key', 'next_attempt_at', 'lease_until'])
      .where('endpoint_id', '=', endpointId as number)
      .where('resource_key', 'in', resources as string[])
      .where(PENDING)
      .where('id', '<', beforeId as number),
);

/** The pending deliveries of these resources of an endpoint made before `beforeId`: what may hold later ones back. */
export function findPendingBefore(
  db: Executor,
  endpointId: number,
  resources: string[],
  beforeId: number,
): Promise<Pick<StoredDelivery, 'id' | 'resource_key' | 'next_attempt_at' | 'lease_until'>[]> {
  return selectPendingBefore(db, resources, endpointId, beforeId);
}

/**
 * Of these resources of an endpoint, those with a pending delivery that `owner` does not hold
 * (waiting for a retry, held back behind one, or claimed by another process): what a new delivery
 * of theirs must wait behind.
 */
export async function resourcesWaiting(
  db: Executor,
  endpointId: number,
  resources: string[],
  now: string,
  owner: string,
): Promise<string[]> {
  if (resources.length === 0) return [];
  const rows = await db
    .selectFrom('webhook_deliveries')
    .select('resource_key')
    .distinct()
    .where('endpoint_id', '=', endpointId)
    .where('resource_key', 'in', resources)
    .where(PENDING)
    .where(sql<SqlBool>`(lease_until is null or lease_until < ${now} or claimed_by is null or claimed_by <> ${owner})`)
    .execute();
  return rows.map((row) => row.resource_key!);
}

const claimRows = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, ids, now: unknown, leaseUntil: unknown, owner: unknown) =>
  db
    .updateTable('webhook_deliveries')
    .set({ lease_until: leaseUntil as string, claimed_by: owner as string })
    .where('id', 'in', ids as number[])
    .where(PENDING)
    .where(claimable(now as string, owner as string))
    .returning('id'),
);

/** Takes the deliveries for `owner` until `leaseUntil`; answers the ids taken (those still pending and free). */
export async function claimDeliveries(
  db: Executor,
  ids: number[],
  now: string,
  leaseUntil: string,
  owner: string,
): Promise<number[]> {
  if (ids.length === 0) return [];
  return (await claimRows(db, ids, now, leaseUntil, owner)).map((row) => Number(row.id));
}

/** Moves the next attempt of pending deliveries to `at` (held back behind an earlier delivery of their resource). */
export async function holdBack(db: Executor, ids: number[], at: string): Promise<void> {
  if (ids.length > 0)
    await db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: at, lease_until: null })
      .where('id', 'in', ids)
      .where('status', '=', 'pending')
      .execute();
}

/**
 * Holds back the pending deliveries of a resource made after `afterId` until `at` (its delivery
 * `afterId` failed and is retried then), releasing this process's claims of them.
 */
export async function holdBackResource(
  db: Executor,
  endpointId: number,
  resource: string,
  afterId: number,
  at: string,
): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ next_attempt_at: at, lease_until: null })
    .where('endpoint_id', '=', endpointId)
    .where('resource_key', '=', resource)
    .where('status', '=', 'pending')
    .where('id', '>', afterId)
    .execute();
}

/** Gives back every pending delivery `owner` has claimed (a process that died): they are due again at once. */
export async function releaseClaimsOf(db: Executor, owner: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ lease_until: null })
    .where('claimed_by', '=', owner)
    .where('status', '=', 'pending')
    .execute();
}

/** Gives deliveries `owner` claimed back unsent. */
export async function releaseDeliveries(db: Executor, ids: number[], owner: string): Promise<void> {
  if (ids.length > 0)
    await db
      .updateTable('webhook_deliveries')
      .set({ lease_until: null })
      .where('id', 'in', ids)
      .where('status', '=', 'pending')
      .where('claimed_by', '=', owner)
      .execute();
}

const markRowsSucceeded = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, ids, now: unknown) =>
  db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      status: sql.lit('succeeded'),
      attempts: eb('attempts', '+', sql.lit(1)),
      next_attempt_at: sql`null`,
      lease_until: sql`null`,
      updated_at: now as string,
    }))
    .where('id', 'in', ids as number[]),
);

/** Records many succeeded deliveries at once: one more attempt each, no next attempt, the lease ended. */
export async function markSucceeded(db: Executor, ids: number[], now: string): Promise<void> {
  if (ids.length > 0) await markRowsSucceeded(db, ids, now);
}

const selectExisting = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, ids) =>
  db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('id', 'in', ids as number[]),
);

/** Which of these deliveries still exist. */
export async function existingDeliveries(db: Executor, ids: number[]): Promise<number[]> {
  return (await selectExisting(db, ids)).map((row) => Number(row.id));
}

const ATTEMPT_FIELDS = [
  'delivery_id',
  'attempted_at',
  'status_code',
  'duration_ms',
  'error',
] as const satisfies readonly (keyof StoredAttempt)[];
const insertAttemptRows = compiledRowInserts(BULK_ROWS_PER_INSERT, {
  table: 'webhook_attempts',
  columns: ATTEMPT_FIELDS,
  types: ['bigint', 'text', 'integer', 'integer', 'text'],
});

export async function insertAttempts(db: Executor, attempts: Omit<StoredAttempt, 'id'>[]): Promise<void> {
  const values: unknown[] = [];
  for (const attempt of attempts) for (const field of ATTEMPT_FIELDS) values.push(attempt[field]);
  await insertAttemptRows(db, values);
}

/** The delivery after an attempt: its status, count of attempts and next attempt; the lease ends (only when its status is `onlyIf`, when given). */
export async function updateDelivery(
  db: Executor,
  id: number,
  changes: Pick<StoredDelivery, 'status' | 'attempts' | 'next_attempt_at'>,
  now: string,
  onlyIf?: StoredDelivery['status'],
): Promise<StoredDelivery | undefined> {
  return db
    .updateTable('webhook_deliveries')
    .set({ ...changes, lease_until: null, updated_at: now })
    .where('id', '=', id)
    .$if(onlyIf !== undefined, (query) => query.where('status', '=', onlyIf!))
    .returningAll()
    .executeTakeFirst();
}

/** Dead-letters every pending delivery of an endpoint (it was disabled). */
export async function deadLetterPending(db: Executor, endpointId: number, now: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'dead', next_attempt_at: null, lease_until: null, updated_at: now })
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .execute();
}

/**
 * Forgets the numbering of at most `limit` resources (webhook_sequences) of which no delivery to
 * their endpoint is kept any more: their deliveries were pruned, ROWI_EVENTS_RETENTION after the
 * last was made (pending ones too). The next event of such a resource is numbered from 1 again
 * (docs/events.md "Order"). A row is deleted only with the `last` it was found with: a fan-out
 * that numbers a delivery of the resource meanwhile (its deliveries not yet visible here) keeps
 * it, so two deliveries of a resource never share a number.
 */
export async function deleteIdleSequences(db: Executor, limit: number): Promise<number> {
  const idle = db
    .selectFrom('webhook_sequences as s')
    .select(['s.endpoint_id', 's.resource_key', 's.last'])
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('webhook_deliveries as d')
            .select('d.id')
            .whereRef('d.endpoint_id', '=', 's.endpoint_id')
            .whereRef('d.resource_key', '=', 's.resource_key'),
        ),
      ),
    )
    .limit(limit);
  const result = await db
    .deleteFrom('webhook_sequences')
    .where((eb) =>
      eb(
        eb.refTuple('endpoint_id', 'resource_key', 'last'),
        'in',
        idle.$asTuple('endpoint_id', 'resource_key', 'last'),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function deleteDeliveriesBefore(db: Executor, cutoff: string, limit: number): Promise<number> {
  const oldest = db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('created_at', '<', cutoff)
    .orderBy('created_at')
    .limit(limit);
  const result = await db.deleteFrom('webhook_deliveries').where('id', 'in', oldest).executeTakeFirst();
  return Number(result.numDeletedRows);
}
