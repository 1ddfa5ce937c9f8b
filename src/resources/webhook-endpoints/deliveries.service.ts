import { nowTimestamp } from '../../db/clock.js';
import type { Executor, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import {
  findAttempts,
  findDeliveries,
  findDeliveryById,
  assignSequences,
  insertDeliveries,
  updateDelivery,
  type StoredAttempt,
  type StoredDelivery,
} from '../../outbox/deliveries.repository.js';
import { nextEventId } from '../../outbox/event-ids.js';
import { recordEvent } from '../../outbox/outbox.js';
import { newDelivery } from '../../outbox/webhook-deliveries.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { assertMayChange, type EndpointContext } from './endpoint-access.js';
import { findStoredEndpoint, presentEndpoint } from './webhook-endpoints.service.js';

/** A delivery as the API shows it, with its attempts. */
function presentDelivery(delivery: StoredDelivery, attempts: StoredAttempt[]) {
  return {
    id: delivery.id,
    endpoint_id: delivery.endpoint_id,
    event_id: delivery.event_id,
    event_type: delivery.event_type,
    resource: delivery.resource_key,
    sequence: delivery.sequence === null ? null : Number(delivery.sequence),
    status: delivery.status,
    next_attempt_at: delivery.status === 'pending' ? delivery.next_attempt_at : null,
    attempts: attempts.map((attempt) => ({
      attempted_at: attempt.attempted_at,
      status_code: attempt.status_code,
      duration_ms: attempt.duration_ms,
      error: attempt.error,
    })),
    created_at: delivery.created_at,
    updated_at: delivery.updated_at,
  };
}

async function withAttempts(db: Executor, deliveries: StoredDelivery[]) {
  const attempts = await findAttempts(
    db,
    deliveries.map((delivery) => delivery.id),
  );
  return deliveries.map((delivery) =>
    presentDelivery(
      delivery,
      attempts.filter((attempt) => attempt.delivery_id === delivery.id),
    ),
  );
}

export async function listDeliveries(db: Executor, endpointId: number, query: ListQuery) {
  await findStoredEndpoint(db, endpointId);
  const page = await findDeliveries(db, endpointId, query);
  return { ...page, rows: await withAttempts(db, page.rows) };
}

export async function getDelivery(db: Executor, endpointId: number, id: number) {
  const [delivery] = await withAttempts(db, [await findStoredDelivery(db, endpointId, id)]);
  return delivery!;
}

async function findStoredDelivery(db: Executor, endpointId: number, id: number): Promise<StoredDelivery> {
  await findStoredEndpoint(db, endpointId);
  const delivery = await findDeliveryById(db, endpointId, id);
  if (!delivery) throw new NotFoundError(`Webhook endpoint ${endpointId} has no delivery ${id}.`);
  return delivery;
}

/** Sends a succeeded or dead-lettered delivery again, on a fresh retry schedule. */
export async function retryDelivery(trx: Trx, endpointId: number, id: number, context: EndpointContext) {
  await assertEnabled(trx, endpointId, context);
  const delivery = await findStoredDelivery(trx, endpointId, id);
  if (delivery.status === 'pending')
    throw new ConflictError('delivery-pending', `Delivery ${id} is still pending: it is sent without being asked.`);
  const now = nowTimestamp();
  const updated = await updateDelivery(trx, id, { status: 'pending', attempts: 0, next_attempt_at: now }, now);
  return (await withAttempts(trx, [updated!]))[0]!;
}

/** A webhook.ping event, sent to this endpoint only (never fanned out). */
export async function pingEndpoint(trx: Trx, endpointId: number, context: EndpointContext) {
  const endpoint = await assertEnabled(trx, endpointId, context);
  const path = `/v1/webhook-endpoints/${endpointId}`;
  const event = { id: nextEventId(), type: 'webhook.ping' as const };
  await recordEvent(trx, event.type, path, { endpoint_id: endpointId, url: endpoint.url }, event.id);
  const ping = newDelivery(endpointId, { ...event, path }, nowTimestamp());
  await assignSequences(trx, [ping]);
  const [delivery] = await insertDeliveries(trx, [ping]);
  return presentDelivery(delivery!, []);
}

/** The endpoint, when this caller may change it (endpoint-access.ts) and it is enabled. */
async function assertEnabled(trx: Trx, endpointId: number, context: EndpointContext) {
  const stored = await findStoredEndpoint(trx, endpointId);
  assertMayChange(stored, context);
  const endpoint = presentEndpoint(stored);
  if (!endpoint.enabled)
    throw new ConflictError(
      'endpoint-disabled',
      `Webhook endpoint ${endpointId} is disabled${endpoint.disabled_reason ? ` (${endpoint.disabled_reason})` : ''}; enable it with PATCH {"enabled": true} first.`,
    );
  return endpoint;
}
