import { randomBytes } from 'node:crypto';
import type { Trx } from '../db/database.js';
import { resourceOf, type EventType } from './event-types.js';
import { insertEvents, type NewEvent, type StoredEvent } from './outbox.repository.js';

/**
 * The outbox: every change a caller can see writes its event here, in the transaction of the
 * change, so a rolled-back change leaves no event and a committed one always has its event
 * (docs/events.md). Readers (the events resource, the stream, webhooks, the NATS bus) read the
 * events table after the commit.
 */
export interface EventDraft {
  type: EventType;
  /** The changed resource's path (/v1/orders/12). */
  path: string;
  /** The resource as it is after the change, or its id when it was deleted. */
  data: unknown;
}

/** Transactions that wrote events: after their commit, readers are woken (events/feed.ts). */
const wroteEvents = new WeakSet<Trx>();

export function wroteEventsIn(trx: Trx): boolean {
  return wroteEvents.has(trx);
}

/** Writes the events of a change in the change's transaction. */
export async function recordEvents(trx: Trx, drafts: (EventDraft & { id?: string })[]): Promise<void> {
  if (drafts.length === 0) return;
  const events: NewEvent[] = drafts.map((draft) => {
    const id = draft.id ?? nextEventId();
    // The time in the id is the event's time: a range of times is a range of ids.
    return { id, type: draft.type, resource: resourceOf(draft.type), path: draft.path, created_at: timeOfEventId(id), data: JSON.stringify(draft.data) };
  });
  await insertEvents(trx, events);
  wroteEvents.add(trx);
}

export function recordEvent(trx: Trx, type: EventType, path: string, data: unknown, id?: string): Promise<void> {
  return recordEvents(trx, [{ type, path, data, ...(id === undefined ? {} : { id }) }]);
}

/** This process's part of every event id: two instances never make the same id. */
const NODE = randomBytes(5).toString('hex');
let lastMs = 0;
let counter = 0;

/**
 * `evt_` and 28 hex digits: the time in milliseconds (12), a counter (6), this process's random
 * part (10). Ids sort by the time they were made; within a process, in the order they were made
 * (a clock that steps back does not reorder them).
 */
export function nextEventId(): string {
  const ms = Math.max(Date.now(), lastMs);
  if (ms !== lastMs) {
    lastMs = ms;
    counter = 0;
  } else if (++counter > 0xffffff) {
    lastMs = ms + 1;
    counter = 0;
  }
  return `evt_${lastMs.toString(16).padStart(12, '0')}${counter.toString(16).padStart(6, '0')}${NODE}`;
}

export const EVENT_ID_PATTERN = '^evt_[0-9a-f]{28}$';

/** When an event was made: the time its id begins with, as rowi writes timestamps. */
export function timeOfEventId(id: string): string {
  return new Date(parseInt(id.slice(4, 16), 16)).toISOString();
}

/**
 * The greatest id an event made at `timestamp` (rowi's stored form) or before can have, and the
 * least one made after it: a time bound on events as a bound on ids.
 */
export function lastEventIdAt(timestamp: string): string {
  return `evt_${Date.parse(timestamp).toString(16).padStart(12, '0')}${'f'.repeat(16)}`;
}
export function firstEventIdAt(timestamp: string): string {
  return `evt_${Date.parse(timestamp).toString(16).padStart(12, '0')}${'0'.repeat(16)}`;
}

/** An event as the API, the stream, webhooks and the bus show it. */
export function presentEvent(event: Pick<StoredEvent, 'id' | 'type' | 'created_at' | 'path' | 'data'>) {
  return { id: event.id, type: event.type, created_at: event.created_at, path: event.path, data: JSON.parse(event.data) as Record<string, unknown> };
}
