import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../observability/logger.js';
import { nowTimestamp } from '../db/clock.js';
import type { Db, Executor } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';
import { isCorruption } from '../db/driver-errors.js';
import { unitOfWork } from '../db/unit-of-work.js';
import type { EventSight } from '../db/visibility.js';
import {
  assignSequences,
  claimDeliveries,
  findDue,
  findPendingBefore,
  holdBack,
  insertDeliveries,
  nextAttemptAt,
  releaseDeliveries,
  resourcesWaiting,
  type NewDelivery,
  type StoredDelivery,
} from './deliveries.repository.js';
import { disableOwnerless, notSent, settleTurn, type OutcomeRules, type Turn } from './delivery-outcomes.js';
import { OutboxWorker, type Wakes } from './outbox-worker.js';
import type { Lease } from './lease.js';
import {
  cursorOf,
  findEventsByIds,
  findEventsAfter,
  latestPosition,
  moveCursor,
  positionOf,
} from './outbox.repository.js';
import type { AddressPolicy } from './ssrf.js';
import { endpointWants, newDelivery, signedDelivery } from './webhook-deliveries.js';
import { findEnabledEndpoints, findEndpointWithOwner, type EndpointWithOwner } from './webhook-endpoints.repository.js';
import { Lanes, type Lane, type Queued } from './webhook-lanes.js';
import { WEBHOOK_CURSOR, webhookLease } from './webhook-lease.js';
import { OutcomeWriter } from './webhook-outcome-writer.js';
import { OWNER_FRESH_MS, ownerRefusal, type ReadableBy } from './webhook-owners.js';
import { WebhookSender } from './webhook-sender.js';

export interface WebhookOptions extends OutcomeRules {
  timeoutMs: number;
  /** Deliveries one endpoint may have in flight at once (ROWI_WEBHOOK_CONCURRENCY), each of another resource. */
  concurrency: number;
  policy: AddressPolicy;
  /** What an endpoint's owner may read, from its grants as stored (webhook-owners.ts). */
  readableBy: ReadableBy;
  userAgent: string;
  /** This process, as the holder of the dispatcher's lease. */
  owner: string;
}

/** The heartbeat: the lease renewed (or asked for), and the list of enabled endpoints read again. */
const HEARTBEAT_MS = 1000;
/**
 * Every endpoint is looked at for due deliveries this often, whatever else woke the dispatcher (a
 * delivery retried by hand; new events, their retries and the ends of attempts wake it at once).
 */
const RESCAN_MS = 3000;
const FAN_OUT_BATCH = 500;
/** Deliveries in flight, all endpoints together: an endpoint's share is this over the endpoints with work, at most its concurrency. */
const MAX_SENDING = 1024;
/** Deliveries claimed ahead of an endpoint's sending, per slot of its share. */
const AHEAD_PER_SLOT = 8;
/** How long a claim lasts: the holder that takes the lease over gives the previous holder's claims back at once. */
const CLAIM_MS = 600_000;
/**
 * Between two rounds while commits keep waking the dispatcher: each round's fan-out and claims
 * cost a few statements whatever they carry, so under load they carry many events each.
 */
const ROUND_EVERY_MS = 50;
/**
 * Webhook delivery (docs/events.md). One process of the deployment holds the dispatcher's lease
 * (a row of event_cursors renewed on a heartbeat every second; another takes over within a few
 * seconds when the beats stop, and at once when it was a process of this host that died:
 * outbox/lease.ts), and does three things when woken by new events, a due retry, the end of an
 * attempt or the heartbeat:
 *
 * 1. Fan-out: the outbox's events after the webhooks' cursor become deliveries of the enabled
 *    endpoints that want them (their types, of resources their owner may read as it is stored
 *    now, made after the endpoint), each numbered within its resource and endpoint (`sequence`),
 *    in one unit of work that also moves the cursor: an event is fanned out once. An endpoint
 *    whose owner no longer exists is disabled instead.
 * 2. Claiming: of each endpoint with room, its due deliveries are read (up to its share of the
 *    sending slots, and AHEAD_PER_SLOT times that ahead), those behind an earlier pending delivery
 *    of their resource held back, and the rest claimed in one statement for all endpoints (a lease
 *    on each, so that no two processes send it) and chained in memory by resource.
 * 3. Sending: of each endpoint, the first delivery of each resource, up to its share (at most
 *    ROWI_WEBHOOK_CONCURRENCY, MAX_SENDING over the endpoints with work), its owner's access
 *    checked again, POSTed and signed as Standard Webhooks says. When it ends, the next of its
 *    resource goes at once, and its outcome joins the others, written together in one unit of
 *    work (delivery-outcomes.ts says what each does): off the path of the next delivery.
 *    A failure holds back the later deliveries of its resource only, until it succeeds or goes dead.
 *
 * A process that dies mid-attempt leaves its claims to the process that takes the lease over from
 * it (which gives them back at once), or to their expiry: the delivery is sent again (at least once).
 */
export class WebhookDispatcher extends OutboxWorker {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #options: WebhookOptions;
  readonly #lease: Lease;
  /** Sends the attempts, over connections kept to receivers between deliveries. */
  readonly #sender: WebhookSender;
  readonly #lanes: Lanes;
  readonly #sending = new Set<Promise<void>>();
  #inFlight = 0;
  readonly #outcomes: OutcomeWriter;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryAt = Infinity;
  readonly #heartbeat: NodeJS.Timeout;
  #listedAt = 0;
  #rescannedAt = 0;
  #nextLookedAt = 0;
  #beatFailing = false;
  /** Whether the heartbeat renews the lease (PostgreSQL). */
  readonly #beats: boolean;

  constructor(db: Db, feed: Wakes, log: FastifyBaseLogger, options: WebhookOptions) {
    super(feed, ROUND_EVERY_MS);
    this.#db = db;
    this.#log = log;
    this.#options = options;
    this.#sender = new WebhookSender(options);
    this.#beats = !isSqlite(db);
    this.#lease = webhookLease(db, options.owner);
    this.#lanes = new Lanes(() => this.#outcomes.writeSoon());
    this.#outcomes = new OutcomeWriter({
      db,
      log,
      rules: options,
      owner: this.#lease.owner,
      lanes: this.#lanes,
      closed: () => this.closed,
      wake: () => this.wake(),
    });
    this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** Stops taking work; attempts in flight finish (each bounded by its time-out), their outcomes are written, the rest given back. */
  override async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#retryTimer);
    await super.close();
    await Promise.allSettled([...this.#sending]);
    await this.#outcomes.write();
    const unsent = [...this.#lanes.held];
    this.#lanes.drop();
    if (unsent.length > 0)
      await unitOfWork(this.#db, (trx) => releaseDeliveries(trx, unsent, this.#lease.owner)).catch((error: unknown) =>
        this.#log.warn({ err: error }, `webhook claims could not be given back: ${faultOf(error)}`),
      );
    await this.#sender.close();
  }

  async #beat(): Promise<void> {
    try {
      const held = this.#beats ? await this.#lease.beat() : this.#lease.heldNow();
      if (held && Date.now() - this.#rescannedAt >= RESCAN_MS) {
        this.#rescannedAt = Date.now();
        for (const lane of this.#lanes.values()) lane.look = true;
      }
    } catch (error) {
      // Said once while it lasts (damage is logged where it is found, db/corruption.ts); the rounds say the rest.
      if (!this.#beatFailing && !isCorruption(error))
        this.#db.outage.failed(
          this.#log,
          'webhook-heartbeat',
          error,
          `webhook dispatcher's heartbeat failed: ${faultOf(error)}`,
        );
      this.#beatFailing = true;
      this.wake();
      return;
    }
    this.#beatFailing = false;
    this.wake();
  }

  protected async round(): Promise<boolean> {
    if (!(await this.#lease.held())) {
      // Another process delivers (what this one held is its now); ask again in a while.
      this.#lanes.drop();
      this.later(this.#lease.retryMs);
      return false;
    }
    this.#lanes.newRound();
    while ((await this.#fanOut()) === FAN_OUT_BATCH && !this.closed);
    await this.#claim();
    this.#pump();
    return true;
  }

  protected async settled(): Promise<void> {
    // At most once a heartbeat: under load the rounds settle many times a second, and the read
    // passes every claimed delivery. Retries this process schedules wake it on their own (#send).
    if (this.closed || Date.now() - this.#nextLookedAt < HEARTBEAT_MS) return;
    this.#nextLookedAt = Date.now();
    const next = await nextAttemptAt(this.#db);
    if (next !== undefined) this.#retryWake(Date.parse(next));
  }

  protected async failed(error: unknown): Promise<void> {
    // A claim may have committed unseen (the connection lost as it committed): new deliveries are
    // not claimed as they are written until #claim has read what is due again.
    for (const lane of this.#lanes.values()) lane.behind = lane.recover = true;
    this.#db.outage.failed(this.#log, 'webhooks', error, `webhook dispatcher failed: ${faultOf(error)}; trying again`);
    this.later(1000);
  }

  /** Wakes (every endpoint looked at) at `at`, unless a wake before it is planned; a time past is left to the heartbeat. */
  #retryWake(at: number): void {
    if (at <= Date.now() || at >= this.#retryAt) return;
    clearTimeout(this.#retryTimer);
    this.#retryAt = at;
    this.#retryTimer = setTimeout(
      () => {
        this.#retryAt = Infinity;
        for (const lane of this.#lanes.values()) lane.look = true;
        this.wake();
      },
      Math.min(at - Date.now() + 5, 2 ** 31 - 1),
    );
    this.#retryTimer.unref();
  }

  /**
   * Fans out one batch of events; answers how many events it read. The deliveries an endpoint has
   * room for, of resources with nothing pending before them, are claimed as they are written and
   * chained here with their events at once (no read, claim and event read of their own later);
   * the others wait in the table for #claim.
   */
  async #fanOut(): Promise<number> {
    const cursor = await cursorOf(this.#db, WEBHOOK_CURSOR);
    const peek = await findEventsAfter(this.#db, cursor, { limit: 1, withoutData: true });
    if (peek.length === 0) return 0;
    const since = this.#lanes.failures;
    const { read, endpoints, claimed, events } = await unitOfWork(this.#db, async (trx) => {
      const endpoints: { endpoint: EndpointWithOwner; readable: EventSight }[] = [];
      for (const endpoint of await findEnabledEndpoints(trx)) {
        if (endpoint.owner === null) await disableOwnerless(trx, endpoint.id, endpoint.owner_caller_id, this.#log);
        else endpoints.push({ endpoint, readable: this.#options.readableBy(endpoint.owner_caller_id, endpoint.owner) });
      }
      // Nobody to send to: the cursor moves to the end at once, no event is read.
      const events =
        endpoints.length === 0
          ? []
          : await findEventsAfter(trx, await cursorOf(trx, WEBHOOK_CURSOR), { limit: FAN_OUT_BATCH });
      const to =
        endpoints.length === 0
          ? await latestPosition(trx)
          : events.length > 0
            ? positionOf(events[events.length - 1]!)
            : undefined;
      if (to === undefined) return { read: 0, endpoints: new Set<number>(), claimed: [], events };
      const now = nowTimestamp();
      const deliveries = events.flatMap((event) =>
        endpoints
          .filter(({ endpoint, readable }) => endpointWants(endpoint, readable, event))
          .map(({ endpoint }) => newDelivery(endpoint.id, event, now)),
      );
      await assignSequences(trx, deliveries);
      await this.#claimAsWritten(trx, deliveries);
      const stored = await insertDeliveries(trx, deliveries);
      if (!(await moveCursor(trx, WEBHOOK_CURSOR, this.#lease.owner, to)))
        throw new Error('the webhook dispatcher lost its lease');
      // A ping's delivery is written with its event: its endpoint has work.
      for (const event of events)
        if (event.type === 'webhook.ping') this.#lanes.lane(Number(/\d+$/.exec(event.path)?.[0])).look = true;
      return {
        read: events.length,
        endpoints: new Set(
          stored.filter((delivery) => delivery.claimed_by === null).map((delivery) => delivery.endpoint_id),
        ),
        claimed: stored.filter((delivery) => delivery.claimed_by !== null),
        events,
      };
    });
    for (const id of endpoints) this.#lanes.lane(id).look = true;
    this.#lanes.chain(claimed, new Map(events.map((event) => [event.id, event])), since);
    return read;
  }

  /**
   * Of new deliveries (in outbox order), claims for this process those its endpoint's lane has room
   * for, when nothing of the lane waits in the table to be claimed before them, and whose resource
   * has nothing pending before them but what this process holds (chained, in flight, or its
   * success not written yet): they may go as soon as they are written. The others are left to
   * #claim, which reads them from the table in order.
   */
  async #claimAsWritten(trx: Executor, deliveries: NewDelivery[]): Promise<void> {
    const room = this.#share() * (1 + AHEAD_PER_SLOT);
    const now = nowTimestamp();
    const leaseUntil = new Date(Date.now() + CLAIM_MS).toISOString();
    const byLane = new Map<number, NewDelivery[]>();
    for (const delivery of deliveries)
      byLane.set(delivery.endpoint_id, [...(byLane.get(delivery.endpoint_id) ?? []), delivery]);
    for (const [id, mine] of byLane) {
      const lane = this.#lanes.get(id);
      if (lane === undefined || lane.gone || lane.behind || lane.held >= room) {
        if (lane !== undefined) lane.behind = true;
        continue;
      }
      let free = room - lane.held;
      const resources = [...new Set(mine.map((delivery) => delivery.resource_key!))];
      // Failed here, its outcome (which holds the later ones back) not written yet: looked at before
      // the read and after it, since an outcome may be written while the read runs, unseen by it.
      const blocked = this.#outcomes.failing(id);
      for (const key of await resourcesWaiting(trx, id, resources, now, this.#lease.owner)) blocked.add(key);
      for (const key of this.#outcomes.failing(id)) blocked.add(key);
      for (const delivery of mine) {
        // Once one of a resource waits in the table, the later ones of it wait there too (in order).
        if (free <= 0 || blocked.has(delivery.resource_key!)) {
          blocked.add(delivery.resource_key!);
          lane.behind = true;
          continue;
        }
        delivery.claimed_by = this.#lease.owner;
        delivery.lease_until = leaseUntil;
        free--;
      }
    }
  }

  /** An endpoint's share of the sending slots now. */
  #share(): number {
    let busy = 0;
    for (const lane of this.#lanes.values()) if (lane.held > 0 || lane.look) busy++;
    return Math.max(1, Math.min(this.#options.concurrency, Math.floor(MAX_SENDING / Math.max(1, busy))));
  }

  /** Claims the due deliveries of every endpoint with room, and chains them by resource. */
  async #claim(): Promise<void> {
    if (Date.now() - this.#listedAt >= HEARTBEAT_MS) await this.#listEndpoints();
    const now = nowTimestamp();
    const since = this.#lanes.failures;
    const share = this.#share();
    const picked: StoredDelivery[] = [];
    const heldBack = new Map<string, number[]>();
    // The endpoints are read side by side (on PostgreSQL, on connections of the pool), none waiting for another's.
    const looked = [...this.#lanes.values()].filter(
      (lane) => lane.look && !lane.gone && lane.held < share * (1 + AHEAD_PER_SLOT),
    );
    await Promise.all(looked.map((lane) => this.#look(lane, share, now, picked, heldBack)));
    if (picked.length === 0 && heldBack.size === 0) return;
    const leaseUntil = new Date(Date.now() + CLAIM_MS).toISOString();
    const claimed = new Set(
      await unitOfWork(this.#db, async (trx) => {
        for (const [at, ids] of heldBack) await holdBack(trx, ids, at);
        return claimDeliveries(
          trx,
          picked.map((delivery) => delivery.id),
          now,
          leaseUntil,
          this.#lease.owner,
        );
      }),
    );
    const taken = picked.filter((delivery) => claimed.has(delivery.id));
    const events = new Map(
      (await findEventsByIds(this.#db, [...new Set(taken.map((delivery) => delivery.event_id))])).map((event) => [
        event.id,
        event,
      ]),
    );
    this.#lanes.chain(taken, events, since);
  }

  /**
   * An endpoint's due deliveries: those that may go now join `picked`; those behind a delivery of
   * their resource that waits for its retry join `heldBack` (by that retry's time).
   */
  async #look(
    lane: Lane,
    share: number,
    now: string,
    picked: StoredDelivery[],
    heldBack: Map<string, number[]>,
  ): Promise<void> {
    const room = share * (1 + AHEAD_PER_SLOT) - lane.held;
    const found = await findDue(this.#db, lane.id, now, room, this.#lease.owner, lane.recover);
    lane.recover = false;
    if (found.length < room) lane.look = false;
    lane.behind = found.length >= room;
    const due = found.filter(
      (delivery) => !this.#lanes.held.has(delivery.id) && !this.#lanes.unwritten.has(delivery.id),
    );
    if (due.length === 0) return;
    due.sort((a, b) => a.id - b.id);
    const numbered = [...new Set(due.flatMap((delivery) => delivery.resource_key ?? []))];
    const earlier = await findPendingBefore(this.#db, lane.id, numbered, due[due.length - 1]!.id);
    this.#lanes.pickInOrder(due, earlier, now, picked, heldBack);
  }

  /** The enabled endpoints: a lane each; the lanes of the others are given up (their claims given back). */
  async #listEndpoints(): Promise<void> {
    const enabled = new Set((await findEnabledEndpoints(this.#db)).map((endpoint) => endpoint.id));
    this.#listedAt = Date.now();
    this.#lanes.keepOnly(enabled);
  }

  /** Starts what may be sent now: of each endpoint, the first delivery of a ready resource, up to its share. */
  #pump(): void {
    if (this.closed) return;
    const share = this.#share();
    for (const lane of this.#lanes.values()) {
      while (!lane.gone && lane.inFlight < share && this.#inFlight < MAX_SENDING && lane.ready.length > 0) {
        const key = lane.ready.shift()!;
        const queued = lane.chains.get(key)?.[0];
        if (queued === undefined) continue;
        lane.sending.add(key);
        const sending = this.#send(lane, key, queued).finally(() => this.#sending.delete(sending));
        this.#sending.add(sending);
      }
    }
  }

  async #send(lane: Lane, key: string, queued: Queued): Promise<void> {
    lane.inFlight++;
    this.#inFlight++;
    let turn: Turn | undefined;
    try {
      turn = await this.#take(lane, queued);
    } catch (error) {
      this.#db.outage.failed(this.#log, 'webhook-attempts', error, `webhook attempt failed: ${faultOf(error)}`);
    } finally {
      lane.inFlight--;
      this.#inFlight--;
      lane.sending.delete(key);
      this.#lanes.held.delete(queued.delivery.id);
    }
    if (turn === undefined) {
      this.#lanes.giveUp(lane, queued.delivery.id);
      return;
    }
    const settled = settleTurn(turn, this.#options);
    if (settled.nextAttemptAt !== null) this.#retryWake(Date.parse(settled.nextAttemptAt));
    this.#outcomes.record(settled);
    if (lane.gone) return;
    this.#lanes.advance(lane, key, turn);
    this.#pump();
    // Claims more once half of what it may hold ahead is gone: a claim serves many deliveries.
    if (lane.held <= (this.#share() * AHEAD_PER_SLOT) / 2) {
      lane.look = true;
      this.wake();
    }
  }

  /** One delivery's turn: sent, or why not; undefined when it is not this process's to take any more. */
  async #take(lane: Lane, { delivery, event }: Queued): Promise<Turn | undefined> {
    if (this.closed || !this.#lease.heldNow()) return undefined;
    const endpoint = await this.#endpointOf(lane);
    // Deleted or disabled meanwhile: nothing more is sent to it.
    if (!endpoint || endpoint.enabled !== 1) return undefined;
    const attemptedAt = nowTimestamp();
    const ownerId = endpoint.owner_caller_id;
    if (!event)
      return {
        delivery,
        kind: 'gone',
        outcome: notSent('the event is no longer kept (ROWI_EVENTS_RETENTION)'),
        attemptedAt,
        ownerId,
      };
    const refused = ownerRefusal(ownerId, lane.readable, event);
    if (refused)
      return {
        delivery,
        kind: endpoint.owner ? 'skipped' : 'ownerless',
        outcome: notSent(refused),
        attemptedAt,
        ownerId,
      };
    const outcome = await this.#sender.send(endpoint.url, ...signedDelivery(endpoint, event, delivery));
    return { delivery, kind: 'sent', outcome, attemptedAt, ownerId };
  }

  /** The endpoint with its owner's grants, read again once they are OWNER_FRESH_MS old (one read for all its deliveries then). */
  async #endpointOf(lane: Lane): Promise<EndpointWithOwner | undefined> {
    if (Date.now() - lane.checkedAt > OWNER_FRESH_MS) {
      lane.refreshing ??= findEndpointWithOwner(this.#db, lane.id)
        .then((endpoint) => {
          lane.endpoint = endpoint;
          lane.readable = endpoint?.owner ? this.#options.readableBy(endpoint.owner_caller_id, endpoint.owner) : null;
          lane.checkedAt = Date.now();
        })
        .finally(() => (lane.refreshing = undefined));
      await lane.refreshing;
    }
    return lane.endpoint;
  }
}
