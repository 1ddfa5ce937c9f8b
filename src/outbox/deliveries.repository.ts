import { sql, type SqlBool } from 'kysely';
import type { Executor } from '../db/database.js';
import type { WebhookAttemptRow, WebhookDeliveryRow } from '../db/event-tables.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';

export type StoredDelivery = WebhookDeliveryRow;
export type StoredAttempt = WebhookAttemptRow;
export type NewDelivery = Omit<StoredDelivery, 'id'>;

export async function insertDeliveries(db: Executor, deliveries: NewDelivery[]): Promise<StoredDelivery[]> {
  if (deliveries.length === 0) return [];
  return db.insertInto('webhook_deliveries').values(deliveries).returningAll().execute();
}

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
 * The deliveries to send now: of each enabled endpoint, its oldest pending delivery (so an
 * endpoint gets its events in order), when it is due and nobody holds its lease.
 */
export function findDueDeliveries(db: Executor, now: string, limit: number): Promise<StoredDelivery[]> {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .selectAll('d')
    .where('e.enabled', '=', 1)
    .where('d.status', '=', 'pending')
    .where((eb) =>
      eb(
        'd.id',
        '=',
        eb
          .selectFrom('webhook_deliveries as h')
          .select((h) => h.fn.min('h.id').as('head'))
          .where('h.endpoint_id', '=', eb.ref('d.endpoint_id'))
          .where('h.status', '=', 'pending'),
      ),
    )
    .where('d.next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('d.lease_until', 'is', null), eb('d.lease_until', '<', now)]))
    .orderBy('d.id')
    .limit(limit)
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
    .executeTakeFirst();
  return row?.next ?? undefined;
}

/** The pending deliveries of an endpoint, oldest first, that are due and nobody holds: its queue. */
export function findQueue(db: Executor, endpointId: number, now: string, limit: number): Promise<StoredDelivery[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where(sql<SqlBool>`(lease_until is null or lease_until < ${now})`)
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** Takes the deliveries for an attempt each, for `owner` until `leaseUntil`; answers the ids taken (another process may have taken some first). */
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
    .where(sql<SqlBool>`(lease_until is null or lease_until < ${now})`)
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
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

/** Gives claimed deliveries back unsent. */
export async function releaseDeliveries(db: Executor, ids: number[]): Promise<void> {
  if (ids.length > 0)
    await db
      .updateTable('webhook_deliveries')
      .set({ lease_until: null })
      .where('id', 'in', ids)
      .where('status', '=', 'pending')
      .execute();
}

export async function insertAttempt(db: Executor, attempt: Omit<StoredAttempt, 'id'>): Promise<void> {
  await db.insertInto('webhook_attempts').values(attempt).execute();
}

/** The delivery after an attempt: its status, count of attempts and next attempt; the lease ends. */
export async function updateDelivery(
  db: Executor,
  id: number,
  changes: Pick<StoredDelivery, 'status' | 'attempts' | 'next_attempt_at'>,
  now: string,
): Promise<StoredDelivery | undefined> {
  return db
    .updateTable('webhook_deliveries')
    .set({ ...changes, lease_until: null, updated_at: now })
    .where('id', '=', id)
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
