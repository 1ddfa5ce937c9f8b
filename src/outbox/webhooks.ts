import type { FastifyBaseLogger } from 'fastify';
import { faultOf } from '../observability/logger.js';
import { nowTimestamp } from '../db/clock.js';
import type { Db } from '../db/database.js';
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
import { presentEvent } from './outbox.js';
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
  findEnabledEndpoints,
  findEndpointWithOwner,
  type EndpointWithOwner,
  type StoredEndpoint,
} from './webhook-endpoints.repository.js';
import { OWNER_FRESH_MS, ownerRefusal, type ReadableBy } from './webhook-owners.js';
import { sendWebhook, webhookAgents, type WebhookAgents } from './webhook-sender.js';

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
  /** Connections kept to receivers between deliveries. */
  readonly #agents: WebhookAgents;
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
  #inFlight = 0;
  #outcomes: SettledTurn[] = [];
  #writing: Promise<void> | undefined;
  #writeTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryAt = Infinity;
  readonly #heartbeat: NodeJS.Timeout;
  #listedAt = 0;
  #rescannedAt = 0;
  #beatFailing = false;
  /** Whether the heartbeat renews the lease (PostgreSQL). */
  readonly #beats: boolean;

  constructor(db: Db, feed: Wakes, log: FastifyBaseLogger, options: WebhookOptions) {
    super(feed, ROUND_EVERY_MS);
    this.#db = db;
    this.#log = log;
    this.#options = options;
    this.#agents = webhookAgents(options.concurrency);
    // Taking over from another holder: its claims are given back, to be sent again now.
    this.#beats = !isSqlite(db);
    this.#lease = new Lease(db, CURSOR, options.owner, this.#beats ? LEASE_MS : SQLITE_LEASE_MS, (trx, previous) =>
      releaseClaimsOf(trx, previous),
    );
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
    this.#agents.destroy();
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
        this.#log.warn({ err: error }, `webhook dispatcher's heartbeat failed: ${faultOf(error)}`);
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
    while ((await this.#fanOut()) === FAN_OUT_BATCH && !this.closed);
    await this.#claim();
    this.#pump();
    return true;
  }

  protected async settled(): Promise<void> {
    if (this.closed) return;
    const next = await nextAttemptAt(this.#db);
    if (next !== undefined) this.#retryWake(Date.parse(next));
  }

  protected async failed(error: unknown): Promise<void> {
    this.#log.warn({ err: error }, `webhook dispatcher failed: ${faultOf(error)}; trying again`);
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

  /** Fans out one batch of events; answers how many events it read. */
  async #fanOut(): Promise<number> {
    const cursor = await cursorOf(this.#db, CURSOR);
    const peek = await findEventsAfter(this.#db, cursor, { limit: 1, withoutData: true });
    if (peek.length === 0) return 0;
    const { read, endpoints } = await unitOfWork(this.#db, async (trx) => {
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
      if (to === undefined) return { read: 0, endpoints: new Set<number>() };
      const now = nowTimestamp();
      const deliveries = events.flatMap((event) =>
        endpoints
          .filter(({ endpoint, readable }) => wants(endpoint, readable, event))
          .map(({ endpoint }) => newDelivery(endpoint.id, event, now)),
      );
      await assignSequences(trx, deliveries);
      await insertDeliveries(trx, deliveries);
      if (!(await moveCursor(trx, CURSOR, this.#lease.owner, to)))
        throw new Error('the webhook dispatcher lost its lease');
      // A ping's delivery is written with its event: its endpoint has work.
      for (const event of events)
        if (event.type === 'webhook.ping') this.#lane(Number(/\d+$/.exec(event.path)?.[0])).look = true;
      return { read: events.length, endpoints: new Set(deliveries.map((delivery) => delivery.endpoint_id)) };
    });
    for (const id of endpoints) this.#lane(id).look = true;
    return read;
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
    for (const delivery of taken) {
      const lane = this.#lanes.get(delivery.endpoint_id);
      if (lane === undefined || lane.gone) {
        this.#unwritten.add(delivery.id);
        this.#release.push(delivery.id);
        continue;
      }
      const key = ownResource(delivery);
      const chain = lane.chains.get(key);
      const queued = { delivery, event: events.get(delivery.event_id) };
      if (chain === undefined) {
        lane.chains.set(key, [queued]);
        lane.ready.push(key);
      } else chain.push(queued);
      // Its owner's grants are read again before it is sent (then shared for OWNER_FRESH_MS).
      lane.checkedAt = 0;
      lane.held++;
      this.#held.add(delivery.id);
    }
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
    const found = await findDue(this.#db, lane.id, now, room, this.#lease.owner);
    if (found.length < room) lane.look = false;
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
      this.#log.warn({ err: error, endpoint_id: lane.id }, `webhook attempt failed: ${faultOf(error)}`);
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
      // The later deliveries of its resource wait for it: let go, and held back when its outcome is written.
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
    const refused = ownerRefusal(ownerId, endpoint.owner && this.#options.readableBy(ownerId, endpoint.owner), event);
    if (refused)
      return {
        delivery,
        kind: endpoint.owner ? 'skipped' : 'ownerless',
        outcome: notSent(refused),
        attemptedAt,
        ownerId,
      };
    const outcome = await sendWebhook(endpoint.url, ...signed(endpoint, event, delivery), {
      timeoutMs: this.#options.timeoutMs,
      policy: this.#options.policy,
      userAgent: this.#options.userAgent,
      agents: this.#agents,
    });
    return { delivery, kind: 'sent', outcome, attemptedAt, ownerId };
  }

  /** The endpoint with its owner's grants, read again once they are OWNER_FRESH_MS old (one read for all its deliveries then). */
  async #endpointOf(lane: Lane): Promise<EndpointWithOwner | undefined> {
    if (Date.now() - lane.checkedAt > OWNER_FRESH_MS) {
      lane.refreshing ??= findEndpointWithOwner(this.#db, lane.id)
        .then((endpoint) => {
          lane.endpoint = endpoint;
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
        this.#log.warn({ err: error }, `webhook outcomes could not be written: ${faultOf(error)}; trying again`);
        setTimeout(() => this.#writeSoon(), 1000).unref();
      } finally {
        this.#writing = undefined;
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
  const body = JSON.stringify({
    ...presentEvent(event),
    resource: delivery.resource_key ?? resourceKeyOf(event.path),
    ...(delivery.sequence === null ? {} : { sequence: Number(delivery.sequence) }),
  });
  const secrets = [endpoint.secret];
  if (
    endpoint.previous_secret !== null &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at > nowTimestamp()
  )
    secrets.push(endpoint.previous_secret);
  return [body, webhookHeaders(secrets, event.id, Math.floor(Date.now() / 1000), body)];
}
