import type { Trx } from '../db/database.js';
import { eventOwnerRuleOf, type EventOwner } from '../db/visibility.js';
import { nextEventId } from './event-ids.js';
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
  /**
   * Whose record it tells of (docs/access.md "Events"): given for a deletion, whose data holds
   * only the id; else read from the data (its created_by, and its user: a user's id, an order's user_id).
   */
  owner?: EventOwner;
}

/** Writes the events of a change in the change's transaction. */
export async function recordEvents(trx: Trx, drafts: (EventDraft & { id?: string })[]): Promise<void> {
  if (drafts.length === 0) return;
  const events: NewEvent[] = drafts.map((draft) => {
    const resource = resourceOf(draft.type);
    const { created_by, user_id } = draft.owner ?? ownerOf(resource, draft.data);
    return {
      id: draft.id ?? nextEventId(),
      type: draft.type,
      resource,
      path: draft.path,
      data: JSON.stringify(representation(draft.data)),
      created_by,
      user_id,
    };
  });
  await insertEvents(trx, events);
  // After the commit, the unit of work tells db.commits, and the feed wakes the readers (outbox/feed.ts).
  trx.wroteEvents = true;
}

/**
 * The data as GET answers the resource: services hand over a record with the `version` its ETag is
 * made from, which the response serialiser leaves out; so does an event.
 */
function representation(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || !('version' in data)) return data;
  const { version: _version, ...rest } = data as Record<string, unknown>;
  return rest;
}

export function recordEvent(trx: Trx, type: EventType, path: string, data: unknown, id?: string): Promise<void> {
  return recordEvents(trx, [{ type, path, data, ...(id === undefined ? {} : { id }) }]);
}

const NO_OWNER: EventOwner = Object.freeze({ created_by: null, user_id: null });

/**
 * Whose record a record of `resource` is, from the record itself, by the owner rule its owned
 * table declares (db/visibility.ts): its created_by, and its user column's value as its user (a
 * user's id, an order's user_id); nobody's for a resource whose events carry no owner.
 */
export function ownerOf(resource: string, data: unknown): EventOwner {
  const rule = eventOwnerRuleOf(resource);
  if (rule === undefined || typeof data !== 'object' || data === null) return NO_OWNER;
  const record = data as Record<string, unknown>;
  const number = (value: unknown) => (typeof value === 'number' ? value : null);
  return {
    created_by: number(record.created_by),
    user_id: rule.userColumn === undefined ? null : number(record[rule.userColumn]),
  };
}

/** An event as the API, the stream, webhooks and the bus show it. */
export function presentEvent(event: Pick<StoredEvent, 'id' | 'type' | 'created_at' | 'path' | 'data'>) {
  return {
    id: event.id,
    type: event.type,
    created_at: event.created_at,
    path: event.path,
    data: JSON.parse(event.data) as Record<string, unknown>,
  };
}
