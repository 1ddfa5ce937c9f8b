import { sql } from 'kysely';
import type { Executor } from '../db/database.js';
import type { DeliveryStatus } from '../db/event-tables.js';

/**
 * What the health of a webhook endpoint reads of its deliveries and attempts. Every query starts
 * from one endpoint's deliveries through an index that leads with it: (endpoint_id, status,
 * updated_at) of migration 0019 for what changed since `since`, (status, endpoint_id, id) for the
 * oldest pending one. A delivery's updated_at moves with each of its attempts (and is never earlier
 * than its last one), so the attempts made since `since` are those of the deliveries changed since.
 */

/**
 * Every status, named: the index's first two columns are then fixed for each, and its updated_at
 * range is read once per status (a skip over the status column that neither database makes alone).
 */
const EVERY_STATUS: DeliveryStatus[] = ['pending', 'succeeded', 'dead'];

/** The endpoint's pending deliveries (all, however old), and those that succeeded or went dead since `since`. */
export async function countDeliveriesByStatus(
  db: Executor,
  endpointId: number,
  since: string,
): Promise<{ status: DeliveryStatus; count: number }[]> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .select((eb) => ['status', eb.fn.countAll<number | string>().as('count')])
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .groupBy('status')
    .unionAll(
      db
        .selectFrom('webhook_deliveries')
        .select((eb) => ['status', eb.fn.countAll<number | string>().as('count')])
        .where('endpoint_id', '=', endpointId)
        .where('status', 'in', ['succeeded', 'dead'])
        .where('updated_at', '>=', since)
        .groupBy('status'),
    )
    .execute();
  return rows.map((row) => ({ status: row.status, count: Number(row.count) }));
}

function attemptsSince(db: Executor, endpointId: number, since: string) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_attempts as a', 'a.delivery_id', 'd.id')
    .where('d.endpoint_id', '=', endpointId)
    .where('d.status', 'in', EVERY_STATUS)
    .where('d.updated_at', '>=', since)
    .where('a.attempted_at', '>=', since);
}

/** The attempts made since `since`, and those of them that succeeded (no error: the endpoint answered 2xx). */
export async function countAttemptsSince(
  db: Executor,
  endpointId: number,
  since: string,
): Promise<{ total: number; succeeded: number }> {
  const row = await attemptsSince(db, endpointId, since)
    .select((eb) => [
      eb.fn.countAll<number | string>().as('total'),
      sql<number | string | null>`sum(case when a.error is null then 1 else 0 end)`.as('succeeded'),
    ])
    .executeTakeFirst();
  return { total: Number(row?.total ?? 0), succeeded: Number(row?.succeeded ?? 0) };
}

/** The latest failed attempt since `since` (an error recorded), or undefined. */
export function findLastFailureSince(db: Executor, endpointId: number, since: string) {
  return attemptsSince(db, endpointId, since)
    .select(['a.attempted_at', 'a.delivery_id', 'a.status_code', 'a.error'])
    .where('a.error', 'is not', null)
    .orderBy('a.attempted_at', 'desc')
    .orderBy('a.id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * When the successful attempt of the delivery that succeeded last was made (of the deliveries kept
 * and succeeded now: one sent again by hand is pending until it succeeds again), or undefined.
 */
export async function findLastSuccessAt(db: Executor, endpointId: number): Promise<string | undefined> {
  const row = await db
    .selectFrom('webhook_attempts')
    .select((eb) => eb.fn.max('attempted_at').as('at'))
    .where('error', 'is', null)
    .where('delivery_id', '=', (eb) =>
      eb
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', endpointId)
        .where('status', '=', 'succeeded')
        .orderBy('updated_at', 'desc')
        .limit(1),
    )
    .executeTakeFirst();
  return row?.at ?? undefined;
}

/** When the endpoint's oldest pending delivery was made (the first by id: ids are given as deliveries are made), or undefined. */
export async function findOldestPendingAt(db: Executor, endpointId: number): Promise<string | undefined> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select('created_at')
    .where('status', '=', 'pending')
    .where('endpoint_id', '=', endpointId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return row?.created_at;
}
