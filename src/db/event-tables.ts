import type { Generated, Selectable } from 'kysely';

/** The outbox and the webhooks' tables (migration 0006), part of Database. */
export interface EventTables {
  events: EventsTable;
  event_cursors: EventCursorsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_sequences: WebhookSequencesTable;
}

/** An event of the outbox, written in the transaction of the change it tells of. */
export interface EventsTable {
  seq: Generated<number>;
  /** The writing transaction's id on PostgreSQL, 0 on SQLite: with seq, the order readers follow. */
  txid: Generated<number | string>;
  id: string;
  type: string;
  resource: string;
  path: string;
  /** JSON: the resource after the change, or its id when deleted. (Its time is in its id.) */
  data: string;
  /** The owner (created_by) of the record it tells of (migration 0016); null: none, or not an owned record. */
  created_by: number | null;
  /** The user whose record it tells of: the user itself, an order's user (migration 0016); null: none. */
  user_id: number | null;
}
export type EventRow = Selectable<EventsTable>;

export interface EventCursorsTable {
  name: string;
  txid: number | string;
  seq: number | string;
  lease_owner: string | null;
  lease_until: string | null;
}

export interface WebhookEndpointsTable {
  id: Generated<number>;
  url: string;
  description: string;
  /** JSON array of event types, or ["*"]. */
  events: string;
  /** JSON array of the resources whose events it may receive: of its types, those its owner could read when they were set. */
  resources: string;
  /** The caller it acts for (its creator; migration 0008); the id stays when that caller is deleted. */
  owner_caller_id: number | null;
  enabled: number;
  disabled_reason: string | null;
  /** Failed attempts in a row; a success resets it. */
  failures: number;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;

export type DeliveryStatus = 'pending' | 'succeeded' | 'dead';

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: number;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  lease_until: string | null;
  /** The lease holder that claimed it last (outbox/lease.ts). */
  claimed_by: string | null;
  /** The resource its event is about (outbox/webhook-deliveries.ts resourceKeyOf): deliveries of one resource go in order (migration 0015). */
  resource_key: string | null;
  /** Its place among the deliveries of its resource to its endpoint, from 1; null when made before migration 0015. */
  sequence: number | string | null;
  created_at: string;
  updated_at: string;
}
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  attempted_at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

/** The last sequence given to a delivery of a resource to an endpoint (migration 0015). */
export interface WebhookSequencesTable {
  endpoint_id: number;
  resource_key: string;
  last: number | string;
}
