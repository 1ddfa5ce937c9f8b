import { nowTimestamp } from '../db/clock.js';
import type { Executor } from '../db/database.js';
import { findDeliveriesOfEvents, lastSequences, resourcesWaiting, type NewDelivery } from './deliveries.repository.js';
import type { Position, StoredEvent } from './outbox.repository.js';
import type { Lanes } from './webhook-lanes.js';
import type { DeliveriesInMemory } from './webhook-memory.js';
import type { OutcomeWriter } from './webhook-outcome-writer.js';

/**
 * The webhook dispatcher's fan-out (webhook-dispatcher.ts): the deliveries of events read again
 * that were made already, new deliveries numbered within their resource and endpoint, and which of
 * them are sent from memory rather than written to wait in the table.
 */

/** How much earlier than its event a delivery's row may say it was made: the clocks of other hosts. */
const RECOVERY_CLOCK_MARGIN_MS = 60_000;

/** What the dispatcher has room for, and what it holds, when new deliveries are made. */
export interface MemoryRoom {
  /** Deliveries one endpoint may hold in memory (its share of the sending slots, and those ahead). */
  room: number;
  lanes: Lanes;
  memory: DeliveriesInMemory;
  outcomes: OutcomeWriter;
  /** The dispatcher's lease owner: a delivery it holds itself is none to wait behind. */
  owner: string;
}

/** Numbers new deliveries within their resource and endpoint, after the last number known or kept. */
export async function numberDeliveries(
  db: Executor,
  memory: DeliveriesInMemory,
  deliveries: NewDelivery[],
): Promise<void> {
  const byEndpoint = new Map<number, Set<string>>();
  for (const delivery of deliveries) {
    const resources = byEndpoint.get(delivery.endpoint_id) ?? new Set<string>();
    byEndpoint.set(delivery.endpoint_id, resources.add(delivery.resource_key!));
  }
  const read = new Map<string, number>();
  // Read for the resources with nothing in memory; again for any whose last delivery in memory was
  // written meanwhile (its number is then in the rows).
  for (;;) {
    const unread = [...byEndpoint].map(
      ([endpointId, resources]) =>
        [
          endpointId,
          memory.unknownSequences(endpointId, resources).filter((resource) => !read.has(`${endpointId} ${resource}`)),
        ] as const,
    );
    if (unread.every(([, resources]) => resources.length === 0)) break;
    for (const [endpointId, resources] of unread) {
      const last = await lastSequences(db, endpointId, resources);
      for (const resource of resources) read.set(`${endpointId} ${resource}`, last.get(resource) ?? 0);
    }
  }
  for (const [endpointId, resources] of byEndpoint)
    for (const resource of resources) {
      const last = read.get(`${endpointId} ${resource}`);
      if (last !== undefined) memory.learnSequence(endpointId, resource, last);
    }
  memory.number(deliveries);
}

/**
 * Of new deliveries (in outbox order), those kept in memory and sent from there: those its
 * endpoint's lane has room for, when nothing of the lane waits in the table to be claimed before
 * them, and whose resource has nothing pending before them but what this process holds (chained,
 * in flight, or its outcome not written yet). A resource with a delivery in memory keeps its later
 * ones in memory too (the table's order is the order rows are written). The others are written,
 * left to #claim, which reads them from the table in order.
 */
export async function keptInMemory(
  trx: Executor,
  deliveries: NewDelivery[],
  { room, lanes, memory, outcomes, owner }: MemoryRoom,
): Promise<{ kept: NewDelivery[]; letGo: NewDelivery[] }> {
  const now = nowTimestamp();
  const kept: NewDelivery[] = [];
  const letGo: NewDelivery[] = [];
  const byLane = new Map<number, NewDelivery[]>();
  for (const delivery of deliveries)
    byLane.set(delivery.endpoint_id, [...(byLane.get(delivery.endpoint_id) ?? []), delivery]);
  for (const [id, mine] of byLane) {
    const lane = lanes.get(id);
    if (lane === undefined || lane.gone) {
      if (lane !== undefined) lane.behind = true;
      continue;
    }
    let free = room - lane.held;
    const resources = [...new Set(mine.map((delivery) => delivery.resource_key!))];
    // Failed here, its outcome (which holds the later ones back) not written yet: looked at before
    // the read and after it, since an outcome may be written while the read runs, unseen by it.
    const blocked = outcomes.failing(id);
    for (const key of await resourcesWaiting(trx, id, resources, now, owner)) blocked.add(key);
    for (const key of outcomes.failing(id)) blocked.add(key);
    const inMemory = new Set<string>();
    for (const delivery of mine) {
      const resource = delivery.resource_key!;
      if (inMemory.has(resource) || memory.holds(id, resource)) {
        // Behind one of its resource in memory: its row must follow that one's, so it is written
        // after it, with the outcomes (at once when the resource waits for a retry).
        kept.push(delivery);
        if (blocked.has(resource)) letGo.push(delivery);
        continue;
      }
      // Once one of a resource waits in the table, the later ones of it wait there too (in order);
      // the other resources' deliveries need not: only a lane without room (whose deliveries in
      // the table would be passed again and again) sends every new one through the table.
      if (blocked.has(resource)) continue;
      if (free <= 0 || lane.behind) {
        blocked.add(resource);
        lane.behind = true;
        continue;
      }
      kept.push(delivery);
      inMemory.add(resource);
      free--;
    }
  }
  return { kept, letGo };
}

/**
 * Of events read again from the cursor as stored (a process that took the dispatcher over, or
 * this one after a failure), the deliveries already made: written, or held in memory here.
 */
export async function deliveriesMade(
  trx: Executor,
  events: StoredEvent[],
  memory: DeliveriesInMemory,
  until: Position | undefined,
): Promise<{ known: Set<string>; recovered: boolean }> {
  if (until === undefined || events.length === 0) return { known: new Set(), recovered: false };
  const last = events[events.length - 1]!;
  const recovered = last.txid > until.txid || (last.txid === until.txid && last.seq >= until.seq);
  const known = memory.keys();
  // A delivery is made after its event: those made since the first event (and a margin for the clocks of other hosts).
  const since = new Date(Date.parse(events[0]!.created_at) - RECOVERY_CLOCK_MARGIN_MS).toISOString();
  for (const made of await findDeliveriesOfEvents(
    trx,
    events.map((event) => event.id),
    since,
  ))
    known.add(`${made.endpoint_id} ${made.event_id}`);
  return { known, recovered };
}
