/**
 * A webhook delivery made from its event: which endpoints get the event, the row written for each,
 * and the body and signed headers it is sent with.
 */
import { nowTimestamp } from '../db/clock.js';
import { eventVisible, type EventSight } from '../db/visibility.js';
import type { NewDelivery, StoredDelivery } from './deliveries.repository.js';
import type { StoredEvent } from './outbox.repository.js';
import { webhookHeaders } from './signing.js';
import type { StoredEndpoint } from './webhook-endpoints.repository.js';

/** The resource an event is about, whose events an endpoint gets in order: its path, an item's stock being the item's. */
export function resourceKeyOf(path: string): string {
  return path.endsWith('/stock') ? path.slice(0, -'/stock'.length) : path;
}

/** Whether the endpoint gets the event: of its types and resources, one its owner may read (`readable`), made after it. */
export function endpointWants(endpoint: StoredEndpoint, readable: EventSight, event: StoredEvent): boolean {
  if (event.type === 'webhook.ping' || event.created_at < endpoint.created_at || !eventVisible(readable, event))
    return false;
  const types = JSON.parse(endpoint.events) as string[];
  const resources = JSON.parse(endpoint.resources) as string[];
  return resources.includes(event.resource) && (types.includes('*') || types.includes(event.type));
}

/** A delivery of the event to the endpoint, due now; its sequence is given when it is inserted (assignSequences). */
export function newDelivery(
  endpointId: number,
  event: Pick<StoredEvent, 'id' | 'type' | 'path'>,
  now: string,
): NewDelivery {
  return {
    endpoint_id: endpointId,
    event_id: event.id,
    event_type: event.type,
    resource_key: resourceKeyOf(event.path),
    sequence: null,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    lease_until: null,
    claimed_by: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * The body and the signed headers of a delivery: signed by the current secret, and by the previous
 * one during a rotation's overlap. The body is the event with the resource it is about and its
 * place among that resource's deliveries to this endpoint (docs/events.md).
 */
export function signedDelivery(
  endpoint: StoredEndpoint,
  event: StoredEvent,
  delivery: StoredDelivery,
): [string, Record<string, string>] {
  // The event as presentEvent shows it, its data spliced in as stored (JSON.stringify's text): the
  // same bytes as parsing and serialising it again, at a fraction of the cost.
  const sequence = delivery.sequence === null ? '' : `,"sequence":${Number(delivery.sequence)}`;
  const body = `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},"created_at":${JSON.stringify(event.created_at)},"path":${JSON.stringify(event.path)},"data":${event.data},"resource":${JSON.stringify(delivery.resource_key ?? resourceKeyOf(event.path))}${sequence}}`;
  const secrets = [endpoint.secret];
  if (
    endpoint.previous_secret !== null &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at > nowTimestamp()
  )
    secrets.push(endpoint.previous_secret);
  return [body, webhookHeaders(secrets, event.id, Math.floor(Date.now() / 1000), body)];
}
