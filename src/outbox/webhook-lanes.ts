/**
 * What the webhook dispatcher holds in memory: the deliveries it claimed, by endpoint (a lane each)
 * and by resource, in the order they are sent, and those it let go whose release or outcome is not
 * written yet. Nothing here reads or writes the database.
 */
import type { EventSight } from '../db/visibility.js';
import type { StoredDelivery } from './deliveries.repository.js';
import { goesOn, type SettledTurn, type Turn } from './delivery-outcomes.js';
import type { StoredEvent } from './outbox.repository.js';
import type { EndpointWithOwner } from './webhook-endpoints.repository.js';

export interface Queued {
  delivery: StoredDelivery;
  event: StoredEvent | undefined;
}

/** A delivery of an endpoint that was written before resources were numbered is a resource of its own. */
export const ownResource = (delivery: StoredDelivery) => delivery.resource_key ?? `delivery:${delivery.id}`;

/** One endpoint's part of the sending, in memory: the deliveries claimed for it, by resource. */
export class Lane {
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

/** The lanes of the endpoints this process sends to, and what they let go. */
export class Lanes {
  readonly #lanes = new Map<number, Lane>();
  /** Ids of the deliveries in the lanes' chains. */
  readonly held = new Set<number>();
  /** Ids of deliveries whose outcome (or release) is not written yet: not claimed again meanwhile. */
  readonly unwritten = new Set<number>();
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
  /** Has what was let go written soon, with the outcomes. */
  readonly #writeSoon: () => void;

  constructor(writeSoon: () => void) {
    this.#writeSoon = writeSoon;
  }

  /** The count of failures so far: what `chain` is told of the failures since a read of due deliveries. */
  get failures(): number {
    return this.#failures;
  }

  values(): IterableIterator<Lane> {
    return this.#lanes.values();
  }

  get(endpointId: number): Lane | undefined {
    return this.#lanes.get(endpointId);
  }

  /** The endpoint's lane, new if it has none. */
  lane(endpointId: number): Lane {
    let lane = this.#lanes.get(endpointId);
    if (lane === undefined) this.#lanes.set(endpointId, (lane = new Lane(endpointId)));
    return lane;
  }

  /** A new round: failures of the rounds before it no longer keep claimed deliveries from their chains. */
  newRound(): void {
    this.#failedAt.clear();
  }

  /** Forgets what this process held (its lease is lost, or it closes): attempts in flight end unrecorded. */
  drop(): void {
    for (const lane of this.#lanes.values()) lane.gone = true;
    this.#lanes.clear();
    this.held.clear();
  }

  /** A lane for each enabled endpoint; the lanes of the others are given up (their claims given back). */
  keepOnly(enabled: Set<number>): void {
    for (const id of enabled) this.lane(id);
    for (const [id, lane] of this.#lanes)
      if (!enabled.has(id)) {
        this.#forget(lane);
        this.#lanes.delete(id);
      }
  }

  /** The endpoint was disabled: its lane is given up. */
  disable(endpointId: number): void {
    const lane = this.#lanes.get(endpointId);
    if (lane !== undefined) this.#forget(lane);
    this.#lanes.delete(endpointId);
  }

  /** A delivery of the lane not attempted (the lease lost, closing, the endpoint gone or disabled): what the lane holds is given back. */
  giveUp(lane: Lane, deliveryId: number): void {
    this.#release.push(deliveryId);
    this.unwritten.add(deliveryId);
    if (!lane.gone) this.#forget(lane);
    this.#lanes.delete(lane.id);
    this.#writeSoon();
  }

  /**
   * Chains claimed deliveries (in id order) by resource in their endpoints' lanes. Given back:
   * those of a lane gone, and those of a resource whose delivery failed after `since` (the count of
   * failures when they were read): that failure holds them back, in the table.
   */
  chain(taken: StoredDelivery[], events: Map<string, StoredEvent>, since: number): void {
    for (const delivery of [...taken].sort((a, b) => a.id - b.id)) {
      const lane = this.#lanes.get(delivery.endpoint_id);
      const key = ownResource(delivery);
      if (lane === undefined || lane.gone || (this.#failedAt.get(`${delivery.endpoint_id} ${key}`) ?? 0) > since) {
        this.unwritten.add(delivery.id);
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
      this.held.add(delivery.id);
    }
    if (this.#release.length > 0) this.#writeSoon();
  }

  /**
   * The first delivery of a resource ended its turn: the next of its resource is ready. When it
   * failed, the later deliveries of its resource wait for it: let go, and held back when its
   * outcome is written; so do those claimed before it failed and not chained yet (chain).
   */
  advance(lane: Lane, key: string, turn: Turn): void {
    const chain = lane.chains.get(key)!;
    chain.shift();
    lane.held--;
    if (goesOn(turn)) {
      if (chain.length > 0) lane.ready.push(key);
      else lane.chains.delete(key);
      return;
    }
    this.#failedAt.set(`${lane.id} ${key}`, ++this.#failures);
    const behind = chain.map(({ delivery }) => delivery.id);
    for (const id of behind) {
      this.held.delete(id);
      this.unwritten.add(id);
    }
    this.#behind.set(turn.delivery.id, behind);
    lane.held -= chain.length;
    lane.chains.delete(key);
  }

  /**
   * Of an endpoint's due deliveries (in id order), those that may go now join `picked`; those
   * behind a delivery of their resource that waits for its retry join `heldBack` (by that retry's
   * time). `earlier` are the pending deliveries of their resources before the last of them.
   */
  pickInOrder(
    due: StoredDelivery[],
    earlier: Pick<StoredDelivery, 'id' | 'resource_key' | 'next_attempt_at'>[],
    now: string,
    picked: StoredDelivery[],
    heldBack: Map<string, number[]>,
  ): void {
    // What holds a delivery back: an earlier pending delivery of its resource that is not chained here.
    const dueIds = new Set(due.map((delivery) => delivery.id));
    const blockers = new Map<string, { id: number; next: string | null }>();
    for (const pending of earlier) {
      if (this.held.has(pending.id) || dueIds.has(pending.id)) continue;
      const known = blockers.get(pending.resource_key!);
      if (known === undefined || pending.id < known.id)
        blockers.set(pending.resource_key!, { id: pending.id, next: pending.next_attempt_at });
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

  /** The deliveries let go since the last write, to be given back with it. */
  takeRelease(): number[] {
    return this.#release.splice(0);
  }

  /** A write that failed: what it was to give back waits for the next. */
  releaseLater(release: number[]): void {
    this.#release.unshift(...release);
  }

  /** A write went through: what it gave back, and the deliveries whose outcomes it wrote, may be claimed again. */
  written(release: number[], turns: readonly SettledTurn[]): void {
    for (const id of release) this.unwritten.delete(id);
    for (const { delivery, status } of turns) {
      // Written: the later deliveries of its resource that waited for it may go now.
      const lane = this.#lanes.get(delivery.endpoint_id);
      if (lane !== undefined && status !== 'pending') lane.look = true;
      this.unwritten.delete(delivery.id);
      for (const id of this.#behind.get(delivery.id) ?? []) this.unwritten.delete(id);
      this.#behind.delete(delivery.id);
    }
  }

  /** Gives up a lane: its chained deliveries not in flight are given back with the next outcomes written. */
  #forget(lane: Lane): void {
    lane.gone = true;
    for (const [key, chain] of lane.chains)
      for (const { delivery } of chain.slice(lane.sending.has(key) ? 1 : 0)) {
        this.held.delete(delivery.id);
        this.unwritten.add(delivery.id);
        this.#release.push(delivery.id);
      }
    lane.chains.clear();
    lane.ready.length = 0;
    lane.held = 0;
    this.#writeSoon();
  }
}
