import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../observability/logger.js';
import { nowTimestamp } from '../db/clock.js';
import type { Db, Executor } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';
import { isCorruption } from '../db/driver-errors.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { eventVisible, type EventSight } from '../db/visibility.js';
import {
  assignSequences,
  claimDeliveries,
  findDue,
  findPendingBefore,
  holdBack,
  insertDeliveries,
  nextAttemptAt,
  releaseClaimsOf,
  releaseDeliveries,
  resourcesWaiting,
  type NewDelivery,
  type StoredDelivery,
} from './deliveries.repository.js';
import {
  disableOwnerless,
  goesOn,
  notSent,
  recordTurns,
  settleTurn,
  type OutcomeRules,
  type SettledTurn,
  type Turn,
} from './delivery-outcomes.js';
import { OutboxWorker, type Wakes } from './outbox-worker.js';
import { Lease } from './lease.js';
import {
  cursorOf,
  findEventsByIds,
  findEventsAfter,
  latestPosition,
  moveCursor,
  positionOf,
  type StoredEvent,
} from './outbox.repository.js';
import { webhookHeaders } from './signing.js';
import type { AddressPolicy } from './ssrf.js';
import {
  anyEnabledEndpoint,
  findEnabledEndpoints,
  findEndpointWithOwner,
  type EndpointWithOwner,
  type StoredEndpoint,
} from './webhook-endpoints.repository.js';
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

const CURSOR = 'webhooks';
/**
 * The dispatcher's lease on PostgreSQL: renewed on every heartbeat; a holder that stops beating is
 * taken over once it runs out. On SQLite every process of the deployment is on one host, where a
 * holder that died is taken over at once (lease.ts), so the lease is long and renewed as it works,
 * with no write a second.
 */
const LEASE_MS = 4000;
const SQLITE_LEASE_MS = 15_000;
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
/** Outcomes are written together, at most this long after their attempt ended, or once this many wait. */
const OUTCOMES_MS = 50;
const OUTCOME_BATCH = 500;
/** A delivery of an endpoint that was written before resources were numbered is a resource of its own. */
const ownResource = (delivery: StoredDelivery) => delivery.resource_key ?? `delivery:${delivery.id}`;

/** The dispatcher's lease, held by `owner` (the dispatcher, or the standby of a process that delivers on a thread: webhook-standby.ts). */
export function webhookLease(db: Db, owner: string): Lease {
  // Taking over from another holder: its claims are given back, to be sent again now.
  return new Lease(db, CURSOR, owner, isSqlite(db) ? SQLITE_LEASE_MS : LEASE_MS, (trx, previous) =>
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
  const cursor = await cursorOf(db, CURSOR);
  const [next] = await findEventsAfter(db, cursor, { limit: 1, withoutData: true });
  if (next === undefined) return false;
  return unitOfWork(db, async (trx) => {
    // The end is read before the endpoints: one enabled after that read gets every event after it.
    const end = await latestPosition(trx);
    if (await anyEnabledEndpoint(trx)) return true;
    if (!(await moveCursor(trx, CURSOR, owner, end))) throw new Error('the webhook dispatcher lost its lease');
    return false;
  });
}

/** Whether `owner` is named the holder of the dispatcher's lease. */
export async function holdsWebhookLease(db: Db, owner: string): Promise<boolean> {
  return (await cursorOf(db, CURSOR)).lease_owner === owner;
}

/** Parses ROWI_WEBHOOK_RETRY_SCHEDULE. */
export function retrySchedule(text: string): number[] {
  return text.split(',').map(Number);
}

/** The resource an event is about, whose events an endpoint gets in order: its path, an item's stock being the item's. */
export function resourceKeyOf(path: string): string {
  return path.endsWith('/stock') ? path.slice(0, -'/stock'.length) : path;
}

interface Queued {
  delivery: StoredDelivery;
  event: StoredEvent | undefined;
}

/** One endpoint's part of the sending, in memory: the deliveries claimed for it, by resource. */
class Lane {
  endpoint: EndpointWithOwner | undefined;
  /** What the endpoint's owner may read, from its grants as read with the endpoint (null: the owner is gone). */
  readable: EventSight | null = null;
  checkedAt = 0;
  refreshing: Promise<void> | undefined;
  /** Claimed deliveries by resource, oldest first; a resource's first may be in flight. */
  readonly chains = new Map<string, Queued[]>();
  /** Resources whose first delivery may be sent now, in turn. */
  readonly ready: string[] = [];
  /** Resources whose first delivery is in flight. */
  readonly sending = new Set<string>();
  /** Deliveries in its chains. */
  held = 0;
  inFlight = 0;
  /** Whether it may have due deliveries not claimed yet. */
  look = true;
  /** Whether deliveries of it may wait in the table unclaimed: then new ones are not claimed as they are written (they would pass them). */
  behind = true;
  /**
   * Whether the table may hold claims of this process that it does not know of (a new lane: the
   * thread before it, under the same name, may have left some; a claim whose commit went unseen):
   * the next read of due deliveries takes those too.
   */
  recover = true;
  /** Disabled or deleted: nothing more is sent. */
  gone = false;

  constructor(readonly id: number) {}
}

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
  readonly #lanes = new Map<number, Lane>();
  /** Ids of the deliveries in the lanes' chains. */
  readonly #held = new Set<number>();
  /** Ids of deliveries whose outcome (or release) is not written yet: not claimed again meanwhile. */
  readonly #unwritten = new Set<number>();
  readonly #sending = new Set<Promise<void>>();
  /** Deliveries claimed and let go unsent, given back with the next outcomes written. */
  readonly #release: number[] = [];
  /** The later deliveries of a resource let go when a delivery of it failed, by that delivery: held back when its outcome is written. */
  readonly #behind = new Map<number, number[]>();
  /**
   * Failures counted in this round, and the count at each resource's latest (by endpoint and
   * resource): a delivery claimed before its resource's failure and chained after it is not sent.
   */
  #failures = 0;
  readonly #failedAt = new Map<string, number>();
  #inFlight = 0;
  #outcomes: SettledTurn[] = [];
  /** The outcomes being written now. */
  #writingTurns: readonly SettledTurn[] = [];
  #writing: Promise<void> | undefined;
  #writeTimer: NodeJS.Timeout | undefined;
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
    this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** Stops taking work; attempts in flight finish (each bounded by its time-out), their outcomes are written, the rest given back. */
  override async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#retryTimer);
    await super.close();
    await Promise.allSettled([...this.#sending]);
    await this.#write();
    const unsent = [...this.#held];
    this.#drop();
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
      this.#drop();
      this.later(this.#lease.retryMs);
      return false;
    }
    this.#failedAt.clear();
    while ((await this.#fanOut()) === FAN_OUT_BATCH && !this.closed);
    await this.#claim();
    this.#pump();
    return true;
  }

  protected async settled(): Promise<void> {
    // At most once a heartbeat: under load the rounds settle many times a second, and the read
    // passes every claimed delivery. Retries this process schedules wake it on their own (#record).
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

  #lane(endpointId: number): Lane {
    let lane = this.#lanes.get(endpointId);
    if (lane === undefined) this.#lanes.set(endpointId, (lane = new Lane(endpointId)));
    return lane;
  }

  /** Forgets what this process held (its lease is lost, or it closes): attempts in flight end unrecorded. */
  #drop(): void {
    for (const lane of this.#lanes.values()) lane.gone = true;
    this.#lanes.clear();
    this.#held.clear();
  }

  /**
   * Fans out one batch of events; answers how many events it read. The deliveries an endpoint has
   * room for, of resources with nothing pending before them, are claimed as they are written and
   * chained here with their events at once (no read, claim and event read of their own later);
   * the others wait in the table for #claim.
   */
  async #fanOut(): Promise<number> {
    const cursor = await cursorOf(this.#db, CURSOR);
    const peek = await findEventsAfter(this.#db, cursor, { limit: 1, withoutData: true });
    if (peek.length === 0) return 0;
    const since = this.#failures;
    const { read, endpoints, claimed, events } = await unitOfWork(this.#db, async (trx) => {
      const endpoints: { endpoint: EndpointWithOwner; readable: EventSight }[] = [];
      for (const endpoint of await findEnabledEndpoints(trx)) {
        if (endpoint.owner === null) await disableOwnerless(trx, endpoint.id, endpoint.owner_caller_id, this.#log);
        else endpoints.push({ endpoint, readable: this.#options.readableBy(endpoint.owner_caller_id, endpoint.owner) });
      }
      // Nobody to send to: the cursor moves to the end at once, no event is read.
      const events =
        endpoints.length === 0 ? [] : await findEventsAfter(trx, await cursorOf(trx, CURSOR), { limit: FAN_OUT_BATCH });
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
          .filter(({ endpoint, readable }) => wants(endpoint, readable, event))
          .map(({ endpoint }) => newDelivery(endpoint.id, event, now)),
      );
      await assignSequences(trx, deliveries);
      await this.#claimAsWritten(trx, deliveries);
      const stored = await insertDeliveries(trx, deliveries);
      if (!(await moveCursor(trx, CURSOR, this.#lease.owner, to)))
        throw new Error('the webhook dispatcher lost its lease');
      // A ping's delivery is written with its event: its endpoint has work.
      for (const event of events)
        if (event.type === 'webhook.ping') this.#lane(Number(/\d+$/.exec(event.path)?.[0])).look = true;
      return {
        read: events.length,
        endpoints: new Set(
          stored.filter((delivery) => delivery.claimed_by === null).map((delivery) => delivery.endpoint_id),
        ),
        claimed: stored.filter((delivery) => delivery.claimed_by !== null),
        events,
      };
    });
    for (const id of endpoints) this.#lane(id).look = true;
    this.#chain(claimed, new Map(events.map((event) => [event.id, event])), since);
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
      const blocked = this.#failing(id);
      for (const key of await resourcesWaiting(trx, id, resources, now, this.#lease.owner)) blocked.add(key);
      for (const key of this.#failing(id)) blocked.add(key);
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

  /** The resources of an endpoint with a failed delivery whose outcome is not written yet. */
  #failing(endpointId: number): Set<string> {
    const keys = new Set<string>();
    for (const turn of [...this.#outcomes, ...this.#writingTurns])
      if (!goesOn(turn) && turn.delivery.endpoint_id === endpointId) keys.add(ownResource(turn.delivery));
    return keys;
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
    const since = this.#failures;
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
    this.#chain(taken, events, since);
  }

  /**
   * Chains claimed deliveries (in id order) by resource in their endpoints' lanes. Given back:
   * those of a lane gone, and those of a resource whose delivery failed after `since` (the count of
   * failures when they were read): that failure holds them back, in the table.
   */
  #chain(taken: StoredDelivery[], events: Map<string, StoredEvent>, since: number): void {
    for (const delivery of [...taken].sort((a, b) => a.id - b.id)) {
      const lane = this.#lanes.get(delivery.endpoint_id);
      const key = ownResource(delivery);
      if (lane === undefined || lane.gone || (this.#failedAt.get(`${delivery.endpoint_id} ${key}`) ?? 0) > since) {
        this.#unwritten.add(delivery.id);
        this.#release.push(delivery.id);
        if (lane !== undefined) lane.look = lane.behind = true;
        continue;
      }
      const chain = lane.chains.get(key);
      const queued = { delivery, event: events.get(delivery.event_id) };
      if (chain === undefined) {
        lane.chains.set(key, [queued]);
        // Its first may be in flight still (sent, its chain emptied meanwhile): then it joins the ready ones when that ends.
        if (!lane.sending.has(key)) lane.ready.push(key);
      } else chain.push(queued);
      // Its owner's grants are read again before it is sent (then shared for OWNER_FRESH_MS).
      lane.checkedAt = 0;
      lane.held++;
      this.#held.add(delivery.id);
    }
    if (this.#release.length > 0) this.#writeSoon();
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
    const due = found.filter((delivery) => !this.#held.has(delivery.id) && !this.#unwritten.has(delivery.id));
    if (due.length === 0) return;
    due.sort((a, b) => a.id - b.id);
    // What holds a delivery back: an earlier pending delivery of its resource that is not chained here.
    const dueIds = new Set(due.map((delivery) => delivery.id));
    const blockers = new Map<string, { id: number; next: string | null }>();
    const numbered = [...new Set(due.flatMap((delivery) => delivery.resource_key ?? []))];
    for (const earlier of await findPendingBefore(this.#db, lane.id, numbered, due[due.length - 1]!.id)) {
      if (this.#held.has(earlier.id) || dueIds.has(earlier.id)) continue;
      const known = blockers.get(earlier.resource_key!);
      if (known === undefined || earlier.id < known.id)
        blockers.set(earlier.resource_key!, { id: earlier.id, next: earlier.next_attempt_at });
    }
    // In id order: a resource's due deliveries are chained after those of it already chained, until one is held back.
    for (const delivery of due) {
      const blocker = blockers.get(ownResource(delivery));
      if (blocker === undefined || blocker.id > delivery.id) picked.push(delivery);
      // Behind a delivery waiting for its retry: not due before it, so not read again until then.
      else if (blocker.next !== null && blocker.next > now)
        heldBack.set(blocker.next, [...(heldBack.get(blocker.next) ?? []), delivery.id]);
    }
  }

  /** The enabled endpoints: a lane each; the lanes of the others are given up (their claims given back). */
  async #listEndpoints(): Promise<void> {
    const enabled = new Set((await findEnabledEndpoints(this.#db)).map((endpoint) => endpoint.id));
    this.#listedAt = Date.now();
    for (const id of enabled) this.#lane(id);
    for (const [id, lane] of this.#lanes)
      if (!enabled.has(id)) {
        this.#forget(lane);
        this.#lanes.delete(id);
      }
  }

  /** Gives up a lane: its chained deliveries not in flight are given back with the next outcomes written. */
  #forget(lane: Lane): void {
    lane.gone = true;
    for (const [key, chain] of lane.chains)
      for (const { delivery } of chain.slice(lane.sending.has(key) ? 1 : 0)) {
        this.#held.delete(delivery.id);
        this.#unwritten.add(delivery.id);
        this.#release.push(delivery.id);
      }
    lane.chains.clear();
    lane.ready.length = 0;
    lane.held = 0;
    this.#writeSoon();
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
      this.#held.delete(queued.delivery.id);
    }
    if (turn === undefined) {
      // Not attempted (the lease lost, closing, the endpoint gone or disabled): what the lane holds is given back.
      this.#release.push(queued.delivery.id);
      this.#unwritten.add(queued.delivery.id);
      if (!lane.gone) this.#forget(lane);
      this.#lanes.delete(lane.id);
      this.#writeSoon();
      return;
    }
    this.#record(settleTurn(turn, this.#options));
    if (lane.gone) return;
    const chain = lane.chains.get(key)!;
    chain.shift();
    lane.held--;
    if (goesOn(turn)) {
      if (chain.length > 0) lane.ready.push(key);
      else lane.chains.delete(key);
    } else {
      // The later deliveries of its resource wait for it: let go, and held back when its outcome is
      // written; so do those claimed before it failed and not chained yet (#chain).
      this.#failedAt.set(`${lane.id} ${key}`, ++this.#failures);
      const behind = chain.map(({ delivery }) => delivery.id);
      for (const id of behind) {
        this.#held.delete(id);
        this.#unwritten.add(id);
      }
      this.#behind.set(queued.delivery.id, behind);
      lane.held -= chain.length;
      lane.chains.delete(key);
    }
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
    const outcome = await this.#sender.send(endpoint.url, ...signed(endpoint, event, delivery));
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

  #record(turn: SettledTurn): void {
    this.#outcomes.push(turn);
    this.#unwritten.add(turn.delivery.id);
    if (turn.nextAttemptAt !== null) this.#retryWake(Date.parse(turn.nextAttemptAt));
    if (this.#outcomes.length >= OUTCOME_BATCH) void this.#write();
    else this.#writeSoon();
  }

  #writeSoon(): void {
    if (this.#writeTimer !== undefined) return;
    this.#writeTimer = setTimeout(() => void this.#write(), OUTCOMES_MS);
  }

  /** Writes the outcomes waiting (and gives back the deliveries let go), in one unit of work; one write at a time. */
  async #write(): Promise<void> {
    clearTimeout(this.#writeTimer);
    this.#writeTimer = undefined;
    while (this.#writing) await this.#writing;
    const turns = this.#outcomes;
    const release = this.#release.splice(0);
    if (turns.length === 0 && release.length === 0) return;
    this.#outcomes = [];
    this.#writingTurns = turns;
    this.#writing = (async () => {
      try {
        const disabled = await unitOfWork(this.#db, async (trx) => {
          await releaseDeliveries(trx, release, this.#lease.owner);
          return recordTurns(trx, turns, this.#options, this.#log);
        });
        for (const id of release) this.#unwritten.delete(id);
        for (const { delivery, status } of turns) {
          // Written: the later deliveries of its resource that waited for it may go now.
          const lane = this.#lanes.get(delivery.endpoint_id);
          if (lane !== undefined && status !== 'pending') lane.look = true;
          this.#unwritten.delete(delivery.id);
          for (const id of this.#behind.get(delivery.id) ?? []) this.#unwritten.delete(id);
          this.#behind.delete(delivery.id);
        }
        for (const id of disabled) {
          const lane = this.#lanes.get(id);
          if (lane !== undefined) this.#forget(lane);
          this.#lanes.delete(id);
        }
        this.wake();
      } catch (error) {
        if (this.closed) {
          this.#log.warn({ err: error }, `webhook outcomes could not be written: ${faultOf(error)}`);
          return;
        }
        // Written with the next ones, a second later; meanwhile their deliveries stay claimed.
        this.#outcomes.unshift(...turns);
        this.#release.unshift(...release);
        this.#db.outage.failed(
          this.#log,
          'webhook-outcomes',
          error,
          `webhook outcomes could not be written: ${faultOf(error)}; trying again`,
        );
        setTimeout(() => this.#writeSoon(), 1000).unref();
      } finally {
        this.#writing = undefined;
        this.#writingTurns = [];
      }
    })();
    await this.#writing;
  }
}

function wants(endpoint: StoredEndpoint, readable: EventSight, event: StoredEvent): boolean {
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
function signed(
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
