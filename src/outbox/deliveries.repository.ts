import { sql, type SqlBool } from 'kysely';
import type { Executor } from '../db/database.js';
import type { WebhookAttemptRow, WebhookDeliveryRow } from '../db/event-tables.js';
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

const INSERT_CHUNK = 1000;

/**
 * `status = 'pending'` with the value in the SQL: only then may the databases read the partial
 * indexes of pending deliveries (migration 0015), which a bound parameter does not let them prove.
 */
const PENDING = sql<SqlBool>`status = 'pending'`;

export async function insertDeliveries(db: Executor, deliveries: NewDelivery[]): Promise<StoredDelivery[]> {
  const stored: StoredDelivery[] = [];
  // In chunks: the databases bound the parameters of one statement (SQLite 32,766, PostgreSQL 65,535).
  for (let from = 0; from < deliveries.length; from += INSERT_CHUNK)
    stored.push(
      ...(await db
        .insertInto('webhook_deliveries')
        .values(deliveries.slice(from, from + INSERT_CHUNK))
        .returningAll()
        .execute()),
    );
  return stored;
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
  const endpoints = [...new Set(deliveries.map((delivery) => delivery.endpoint_id))];
  const resources = [...new Set(deliveries.map((delivery) => delivery.resource_key!))];
  for (let from = 0; from < resources.length; from += INSERT_CHUNK) {
    const rows = await db
      .selectFrom('webhook_sequences')
      .selectAll()
      .where('endpoint_id', 'in', endpoints)
      .where('resource_key', 'in', resources.slice(from, from + INSERT_CHUNK))
      .execute();
    for (const row of rows) last.set(keyOf(row.endpoint_id, row.resource_key), Number(row.last));
  }
  const touched = new Map<string, { endpoint_id: number; resource_key: string; last: number }>();
  for (const delivery of deliveries) {
    const key = keyOf(delivery.endpoint_id, delivery.resource_key!);
    const next = (last.get(key) ?? 0) + 1;
    last.set(key, next);
    delivery.sequence = next;
    touched.set(key, { endpoint_id: delivery.endpoint_id, resource_key: delivery.resource_key!, last: next });
  }
  const rows = [...touched.values()];
  for (let from = 0; from < rows.length; from += INSERT_CHUNK)
    await db
      .insertInto('webhook_sequences')
      .values(rows.slice(from, from + INSERT_CHUNK))
      .onConflict((conflict) =>
        conflict.columns(['endpoint_id', 'resource_key']).doUpdateSet((eb) => ({ last: eb.ref('excluded.last') })),
      )
      .execute();
}

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
 * waiting for a retry later are not read at all.
 */
export function findDue(
  db: Executor,
  endpointId: number,
  now: string,
  limit: number,
  owner: string,
): Promise<StoredDelivery[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where(PENDING)
    .where('next_attempt_at', '<=', now)
    .where(claimable(now, owner))
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** The pending deliveries of these resources of an endpoint made before `beforeId`: what may hold later ones back. */
export function findPendingBefore(
  db: Executor,
  endpointId: number,
  resources: string[],
  beforeId: number,
): Promise<Pick<StoredDelivery, 'id' | 'resource_key' | 'next_attempt_at' | 'lease_until'>[]> {
  if (resources.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_deliveries')
    .select(['id', 'resource_key', 'next_attempt_at', 'lease_until'])
    .where('endpoint_id', '=', endpointId)
    .where('resource_key', 'in', resources)
    .where(PENDING)
    .where('id', '<', beforeId)
    .execute();
}

/** Takes the deliveries for `owner` until `leaseUntil`; answers the ids taken (those still pending and free). */
export async function claimDeliveries(
  db: Executor,
  ids: number[],
  now: string,
  leaseUntil: string,
  owner: string,
): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('webhook_deliveries')
    .set({ lease_until: leaseUntil, claimed_by: owner })
    .where('id', 'in', ids)
    .where('status', '=', 'pending')
    .where(claimable(now, owner))
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
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

/** Records many succeeded deliveries at once: one more attempt each, no next attempt, the lease ended. */
export async function markSucceeded(db: Executor, ids: number[], now: string): Promise<void> {
  for (let from = 0; from < ids.length; from += INSERT_CHUNK)
    await db
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status: 'succeeded',
        attempts: eb('attempts', '+', 1),
        next_attempt_at: null,
        lease_until: null,
        updated_at: now,
      }))
      .where('id', 'in', ids.slice(from, from + INSERT_CHUNK))
      .execute();
}

/** Which of these deliveries still exist. */
export async function existingDeliveries(db: Executor, ids: number[]): Promise<number[]> {
  const existing: number[] = [];
  for (let from = 0; from < ids.length; from += INSERT_CHUNK) {
    const rows = await db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('id', 'in', ids.slice(from, from + INSERT_CHUNK))
      .execute();
    existing.push(...rows.map((row) => Number(row.id)));
  }
  return existing;
}

export async function insertAttempts(db: Executor, attempts: Omit<StoredAttempt, 'id'>[]): Promise<void> {
  for (let from = 0; from < attempts.length; from += INSERT_CHUNK)
    await db
      .insertInto('webhook_attempts')
      .values(attempts.slice(from, from + INSERT_CHUNK))
      .execute();
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
