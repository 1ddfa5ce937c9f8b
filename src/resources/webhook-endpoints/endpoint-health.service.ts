import type { Static } from 'typebox';
import type { Executor } from '../../db/database.js';
import {
  countAttemptsSince,
  countDeliveriesByStatus,
  findLastFailureSince,
  findLastSuccessAt,
  findOldestPendingAt,
} from '../../outbox/delivery-health.repository.js';
import type { WebhookEndpointHealthSchema } from './endpoint-health.schema.js';
import { findStoredEndpoint } from './webhook-endpoints.service.js';

export type WebhookEndpointHealth = Static<typeof WebhookEndpointHealthSchema>;

/** The window the health counts: the last day. */
export const HEALTH_WINDOW_MS = 24 * 60 * 60 * 1000;

/**
 * Whether an endpoint's receiver keeps up: its deliveries pending now, those that succeeded or went
 * dead in the last day, that day's attempts and the latest failure among them, how long the oldest
 * pending delivery has waited, and when a delivery last succeeded. 404 as GET of the endpoint.
 */
export async function getEndpointHealth(
  db: Executor,
  endpointId: number,
  now = Date.now(),
): Promise<WebhookEndpointHealth> {
  await findStoredEndpoint(db, endpointId);
  const since = new Date(now - HEALTH_WINDOW_MS).toISOString();
  const deliveries = { pending: 0, succeeded: 0, dead: 0 };
  for (const { status, count } of await countDeliveriesByStatus(db, endpointId, since)) deliveries[status] = count;
  const attempts = await countAttemptsSince(db, endpointId, since);
  const oldestPending = await findOldestPendingAt(db, endpointId);
  const lastFailure = await findLastFailureSince(db, endpointId, since);
  return {
    endpoint_id: endpointId,
    window_start: since,
    deliveries,
    attempts: { ...attempts, failed: attempts.total - attempts.succeeded },
    success_rate: attempts.total === 0 ? null : Math.round((attempts.succeeded / attempts.total) * 1000) / 1000,
    lag_ms: oldestPending === undefined ? null : Math.max(0, now - Date.parse(oldestPending)),
    last_success_at: (await findLastSuccessAt(db, endpointId)) ?? null,
    last_failure:
      lastFailure === undefined
        ? null
        : {
            at: lastFailure.attempted_at,
            delivery_id: Number(lastFailure.delivery_id),
            status_code: lastFailure.status_code,
            error: lastFailure.error,
          },
  };
}
