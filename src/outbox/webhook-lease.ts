/**
 * Which process of the deployment delivers webhooks: the dispatcher's lease, a row of
 * event_cursors that also holds the webhooks' cursor in the outbox. One process holds it and
 * renews it; another takes it over when the holder stops, and gives back the holder's claims.
 */
import type { Db } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { releaseClaimsOf } from './deliveries.repository.js';
import { Lease } from './lease.js';
import { cursorOf, findEventsAfter, latestPosition, moveCursor } from './outbox.repository.js';
import { anyEnabledEndpoint } from './webhook-endpoints.repository.js';

/** The webhooks' cursor, whose row is the dispatcher's lease. */
export const WEBHOOK_CURSOR = 'webhooks';
/**
 * The dispatcher's lease on PostgreSQL: renewed on every heartbeat; a holder that stops beating is
 * taken over once it runs out. On SQLite every process of the deployment is on one host, where a
 * holder that died is taken over at once (lease.ts), so the lease is long and renewed as it works,
 * with no write a second.
 */
const LEASE_MS = 4000;
const SQLITE_LEASE_MS = 15_000;

/** The dispatcher's lease, held by `owner` (the dispatcher, or the standby of a process that delivers on a thread: webhook-standby.ts). */
export function webhookLease(db: Db, owner: string): Lease {
  // Taking over from another holder: its claims are given back, to be sent again now.
  return new Lease(db, WEBHOOK_CURSOR, owner, isSqlite(db) ? SQLITE_LEASE_MS : LEASE_MS, (trx, previous) =>
    releaseClaimsOf(trx, previous),
  );
}

/**
 * The heartbeat's hold on the dispatcher's lease: renewed on every beat on PostgreSQL; on SQLite
 * (a long lease, taken over at once from a holder of this host that died) only once a third of it is left.
 */
export function beatWebhookLease(db: Db, lease: Lease): Promise<boolean> {
  return isSqlite(db) ? lease.held() : lease.beat();
}

/**
 * While no endpoint is enabled, moves the webhooks' cursor to the outbox's end, as the fan-out
 * would (nobody is to get those events: an endpoint gets none made before it), so that the
 * dispatcher that starts once one is enabled does not read them all; `owner` holds the lease.
 * Answers whether an endpoint is enabled (then the cursor stays).
 */
export async function skipWhileNoEndpoint(db: Db, owner: string): Promise<boolean> {
  if (await anyEnabledEndpoint(db)) return true;
  const cursor = await cursorOf(db, WEBHOOK_CURSOR);
  const [next] = await findEventsAfter(db, cursor, { limit: 1, withoutData: true });
  if (next === undefined) return false;
  return unitOfWork(db, async (trx) => {
    // The end is read before the endpoints: one enabled after that read gets every event after it.
    const end = await latestPosition(trx);
    if (await anyEnabledEndpoint(trx)) return true;
    if (!(await moveCursor(trx, WEBHOOK_CURSOR, owner, end))) throw new Error('the webhook dispatcher lost its lease');
    return false;
  });
}

/** Whether `owner` is named the holder of the dispatcher's lease. */
export async function holdsWebhookLease(db: Db, owner: string): Promise<boolean> {
  return (await cursorOf(db, WEBHOOK_CURSOR)).lease_owner === owner;
}
