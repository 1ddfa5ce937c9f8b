import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../observability/logger.js';
import { nowTimestamp } from '../db/clock.js';
import type { Db } from '../db/database.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { eventVisible, type EventSight } from '../db/visibility.js';
import {
  claimDeliveries,
  findDueDeliveries,
  findQueue,
  insertDeliveries,
  nextAttemptAt,
  releaseClaimsOf,
  releaseDeliveries,
  type NewDelivery,
  type StoredDelivery,
} from './deliveries.repository.js';
import { disableOwnerless, goesOn, notSent, recordTurn, type OutcomeRules, type Turn } from './delivery-outcomes.js';
import type { EventFeed } from './feed.js';
import { OutboxWorker } from './outbox-worker.js';
import { presentEvent } from './outbox.js';
import { Lease } from './lease.js';
import {
  cursorOf,
  findEventById,
  findEventsAfter,
  latestPosition,
  moveCursor,
  positionOf,
  type StoredEvent,
} from './outbox.repository.js';
import { webhookHeaders } from './signing.js';
import type { AddressPolicy } from './ssrf.js';
import {
  findEnabledEndpoints,
  findEndpointWithOwner,
  type EndpointWithOwner,
  type StoredEndpoint,
} from './webhook-endpoints.repository.js';
import { OWNER_FRESH_MS, ownerRefusal, type ReadableBy } from './webhook-owners.js';
import { sendWebhook, webhookAgents } from './webhook-sender.js';

export interface WebhookOptions extends OutcomeRules {
  timeoutMs: number;
  policy: AddressPolicy;
  /** What an endpoint's owner may read, from its grants as stored (webhook-owners.ts). */
  readableBy: ReadableBy;
  userAgent: string;
  /** This process, as the holder of the dispatcher's lease. */
  owner: string;
}

const CURSOR = 'webhooks';
const LEASE_MS = 15_000;
const FAN_OUT_BATCH = 500;
const MAX_SENDING = 16;
/** Deliveries of one endpoint claimed and sent in a row, their outcomes recorded together. */
const QUEUE = 32;
const BATCH_MS = 5000;

/** Parses ROWI_WEBHOOK_RETRY_SCHEDULE. */
export function retrySchedule(text: string): number[] {
  return text.split(',').map(Number);
}

/**
 * Webhook delivery (docs/events.md). One process of the deployment holds the dispatcher's lease
 * (a row of event_cursors, renewed while it runs; another takes over within LEASE_MS when it
 * stops, and at once when it was a process of this host that died: outbox/lease.ts), and does two things when woken by new events or a due retry:
 *
 * 1. Fan-out: the outbox's events after the webhooks' cursor become deliveries of the enabled
 *    endpoints that want them (their types, of resources their owner may read as it is stored
 *    now, made after the endpoint), in one unit of work that also moves the cursor: an event is
 *    fanned out once. An endpoint whose owner no longer exists is disabled instead.
 * 2. Sending: of each endpoint, the oldest pending delivery, when due, is claimed (a lease on the
 *    delivery, so that no two processes send it at once), its owner's access checked again, and
 *    POSTed, signed as Standard Webhooks says (delivery-outcomes.ts says what each outcome does):
 *    a failure is retried on the schedule, with jitter, then dead-lettered; an endpoint failing
 *    `disableAfter` times in a row is disabled and its pending deliveries dead-lettered. A process that dies mid-attempt leaves its claims to
 *    expire, or to the process that takes the lease over from it: the delivery is sent again (at
 *    least once).
 */
export class WebhookDispatcher extends OutboxWorker {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #options: WebhookOptions;
  readonly #sending = new Map<number, Promise<void>>();
  readonly #lease: Lease;
  /** Connections kept to receivers between deliveries. */
  readonly #agents = webhookAgents();

  constructor(db: Db, feed: EventFeed, log: FastifyBaseLogger, options: WebhookOptions) {
    super(feed);
    this.#db = db;
    this.#log = log;
    this.#options = options;
    // Taking over from a process that died: its claims are given back, to be sent again now.
    this.#lease = new Lease(db, CURSOR, options.owner, LEASE_MS, (trx, previous) => releaseClaimsOf(trx, previous));
  }

  /** Stops taking work; attempts in flight finish (each bounded by its time-out). */
  override async close(): Promise<void> {
    await super.close();
    await Promise.allSettled(this.#sending.values());
    this.#agents.destroy();
  }

  protected async round(): Promise<boolean> {
    if (!(await this.#lease.held())) {
      // Another process delivers; look again when its lease could have run out.
      this.later(this.#lease.retryMs);
      return false;
    }
    while ((await this.#fanOut()) === FAN_OUT_BATCH && !this.closed);
    await this.#sendDue();
    return true;
  }

  protected async settled(): Promise<void> {
    if (this.closed) return;
    const next = await nextAttemptAt(this.#db);
    if (next !== undefined) this.later(Math.max(0, Date.parse(next) - Date.now()) + 5);
  }

  protected async failed(error: unknown): Promise<void> {
    this.#log.warn({ err: error }, `webhook dispatcher failed: ${faultOf(error)}; trying again`);
    this.later(1000);
  }

  /** Fans out one batch of events; answers how many events it read. */
  async #fanOut(): Promise<number> {
    const cursor = await cursorOf(this.#db, CURSOR);
    const peek = await findEventsAfter(this.#db, cursor, { limit: 1, withoutData: true });
    if (peek.length === 0) return 0;
    return unitOfWork(this.#db, async (trx) => {
      const endpoints: { endpoint: EndpointWithOwner; readable: EventSight }[] = [];
      for (const endpoint of await findEnabledEndpoints(trx)) {
        if (endpoint.owner === null) await disableOwnerless(trx, endpoint.id, endpoint.owner_caller_id, this.#log);
        else endpoints.push({ endpoint, readable: this.#options.readableBy(endpoint.owner_caller_id, endpoint.owner) });
      }
      // Nobody to send to: the cursor moves to the end at once, no event is read.
      const events =
        endpoints.length === 0
          ? []
          : await findEventsAfter(trx, await cursorOf(trx, CURSOR), { limit: FAN_OUT_BATCH, withoutData: true });
      const to =
        endpoints.length === 0
          ? await latestPosition(trx)
          : events.length > 0
            ? positionOf(events[events.length - 1]!)
            : undefined;
      if (to === undefined) return 0;
      const now = nowTimestamp();
      const deliveries = events.flatMap((event) =>
        endpoints
          .filter(({ endpoint, readable }) => wants(endpoint, readable, event))
          .map(({ endpoint }) => newDelivery(endpoint.id, event, now)),
      );
      await insertDeliveries(trx, deliveries);
      if (!(await moveCursor(trx, CURSOR, this.#lease.owner, to)))
        throw new Error('the webhook dispatcher lost its lease');
      return events.length;
    });
  }

  async #sendDue(): Promise<void> {
    if (this.#sending.size >= MAX_SENDING) return;
    const now = nowTimestamp();
    const due = await findDueDeliveries(this.#db, now, MAX_SENDING * 2);
    for (const head of due) {
      if (this.#sending.size >= MAX_SENDING || this.closed) break;
      if (this.#sending.has(head.endpoint_id)) continue;
      // The endpoint's next deliveries, from its head, claimed at once: sent in order, one at a time.
      const queue = await findQueue(this.#db, head.endpoint_id, now, QUEUE);
      // A batch stops starting attempts after BATCH_MS: its claims last that, one attempt and a margin.
      const leaseUntil = new Date(Date.now() + BATCH_MS + this.#options.timeoutMs + LEASE_MS).toISOString();
      const claimed = new Set(
        await unitOfWork(this.#db, (trx) =>
          claimDeliveries(
            trx,
            queue.map((delivery) => delivery.id),
            now,
            leaseUntil,
            this.#lease.owner,
          ),
        ),
      );
      const gap = queue.findIndex((delivery) => !claimed.has(delivery.id));
      const batch = gap === -1 ? queue : queue.slice(0, gap);
      if (batch.length === 0 || batch[0]!.id !== head.id) {
        if (claimed.size > 0) await unitOfWork(this.#db, (trx) => releaseDeliveries(trx, [...claimed]));
        continue;
      }
      const attempt = this.#attempt(
        batch,
        [...claimed].filter((id) => !batch.some((delivery) => delivery.id === id)),
      )
        .catch((error: unknown) =>
          this.#log.warn(
            { err: error, endpoint_id: head.endpoint_id },
            'webhook attempts could not be recorded; they are sent again when their lease runs out',
          ),
        )
        .finally(() => {
          this.#sending.delete(head.endpoint_id);
          this.wake();
        });
      this.#sending.set(head.endpoint_id, attempt);
    }
  }

  /**
   * Sends the claimed deliveries of one endpoint in order, stopping at the first failure (the
   * rest wait for it: an endpoint gets its events in order), and records every outcome in one
   * unit of work; the deliveries not sent are released. The owner's grants are read again once
   * they are OWNER_FRESH_MS old, so a batch never sends long on what its owner could once read.
   */
  async #attempt(batch: StoredDelivery[], unused: number[]): Promise<void> {
    const endpointId = batch[0]!.endpoint_id;
    let endpoint = await findEndpointWithOwner(this.#db, endpointId);
    let checkedAt = Date.now();
    const turns: Turn[] = [];
    const started = Date.now();
    for (const delivery of batch) {
      if (Date.now() - started > BATCH_MS) break;
      if (Date.now() - checkedAt > OWNER_FRESH_MS) {
        endpoint = await findEndpointWithOwner(this.#db, endpointId);
        checkedAt = Date.now();
      }
      // Deleted meanwhile: its deliveries went with it.
      if (!endpoint) return;
      const turn = await this.#take(endpoint, delivery);
      turns.push(turn);
      if (!goesOn(turn) || this.closed) break;
    }
    const unsent = [...unused, ...batch.slice(turns.length).map((delivery) => delivery.id)];
    await unitOfWork(this.#db, async (trx) => {
      for (const turn of turns) await recordTurn(trx, endpointId, turn, this.#options, this.#log);
      await releaseDeliveries(trx, unsent);
    });
  }

  /** One delivery's turn: sent, or why not. */
  async #take(endpoint: EndpointWithOwner, delivery: StoredDelivery): Promise<Turn> {
    const attemptedAt = nowTimestamp();
    const ownerId = endpoint.owner_caller_id;
    const event = await findEventById(this.#db, delivery.event_id);
    if (!event)
      return {
        delivery,
        kind: 'gone',
        outcome: notSent('the event is no longer kept (ROWI_EVENTS_RETENTION)'),
        attemptedAt,
        ownerId,
      };
    const refused = ownerRefusal(ownerId, endpoint.owner && this.#options.readableBy(ownerId, endpoint.owner), event);
    if (refused)
      return {
        delivery,
        kind: endpoint.owner ? 'skipped' : 'ownerless',
        outcome: notSent(refused),
        attemptedAt,
        ownerId,
      };
    const outcome = await sendWebhook(endpoint.url, ...signed(endpoint, event), {
      timeoutMs: this.#options.timeoutMs,
      policy: this.#options.policy,
      userAgent: this.#options.userAgent,
      agents: this.#agents,
    });
    return { delivery, kind: 'sent', outcome, attemptedAt, ownerId };
  }
}

function wants(endpoint: StoredEndpoint, readable: EventSight, event: StoredEvent): boolean {
  if (event.type === 'webhook.ping' || event.created_at < endpoint.created_at || !eventVisible(readable, event))
    return false;
  const types = JSON.parse(endpoint.events) as string[];
  const resources = JSON.parse(endpoint.resources) as string[];
  return resources.includes(event.resource) && (types.includes('*') || types.includes(event.type));
}

export function newDelivery(endpointId: number, event: Pick<StoredEvent, 'id' | 'type'>, now: string): NewDelivery {
  return {
    endpoint_id: endpointId,
    event_id: event.id,
    event_type: event.type,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    lease_until: null,
    claimed_by: null,
    created_at: now,
    updated_at: now,
  };
}

/** The body and the signed headers of a delivery: signed by the current secret, and by the previous one during a rotation's overlap. */
function signed(endpoint: StoredEndpoint, event: StoredEvent): [string, Record<string, string>] {
  const body = JSON.stringify(presentEvent(event));
  const secrets = [endpoint.secret];
  if (
    endpoint.previous_secret !== null &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at > nowTimestamp()
  )
    secrets.push(endpoint.previous_secret);
  return [body, webhookHeaders(secrets, event.id, Math.floor(Date.now() / 1000), body)];
}
