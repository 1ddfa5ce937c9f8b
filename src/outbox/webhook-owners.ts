import type { Role } from '../db/database.js';
import { eventVisible, type EventSight } from '../db/visibility.js';
import type { StoredEvent } from './outbox.repository.js';

/**
 * Who a webhook endpoint acts for: its owner, the caller that created it (docs/events.md). The
 * endpoint is sent an event only while its owner exists and may see the record the event is
 * about (its resource, and the record itself when the owner sees only its own: docs/access.md),
 * checked from the owner's grants as stored at fan-out and again before each attempt, so that a
 * narrowed, demoted or deleted owner stops its endpoints as it stops its requests.
 */

/** The owner's grants as stored (the callers table), or null when the owner no longer exists. */
export interface OwnerGrants {
  role: Role;
  extra_scopes: string;
  removed_scopes: string;
  /** The resources it sees only its own records of: none of their events is sent (docs/access.md). */
  own_records: string;
}

/**
 * The events caller `ownerId` with these grants may see now: by resource, whose records. auth/
 * knows the roles and record access; the process hands this in (app.ts), as outbox/ stands below auth/.
 */
export type ReadableBy = (ownerId: number | null, owner: OwnerGrants) => EventSight;

/** Before each attempt the owner's grants are read again once they are older than this. */
export const OWNER_FRESH_MS = 500;

/** The resources an endpoint is sent events of: those it was set up for (JSON), that its owner may read now. */
export function sentResources(resources: string, readable: { has(resource: string): boolean }): string[] {
  return (JSON.parse(resources) as string[]).filter((resource) => readable.has(resource));
}

/**
 * Why the event may not be sent for an owner that may read `readable` (null: the owner no longer
 * exists), or undefined when it may. A ping is about the
 * endpoint itself and is sent to it alone, by a caller that may change it: only the owner's
 * existence counts for it.
 */
export function ownerRefusal(
  ownerId: number | null,
  readable: EventSight | null,
  event: Pick<StoredEvent, 'type' | 'resource' | 'created_by' | 'user_id'>,
): string | undefined {
  if (readable === null) return `not sent: ${ownerGone(ownerId)}`;
  if (event.type === 'webhook.ping' || eventVisible(readable, event)) return undefined;
  if (readable.has(event.resource))
    return `not sent: the endpoint's owner (caller ${ownerId}) sees only its own records of ${event.resource}, and this event is of another's`;
  return `not sent: the endpoint's owner (caller ${ownerId}) may no longer read ${event.resource} (${event.resource}:read)`;
}

/** Why an endpoint without an owner is disabled. */
export function ownerGone(ownerId: number | null): string {
  const whose = ownerId === null ? 'it has no owner' : `its owner, caller ${ownerId}, no longer exists`;
  return `${whose}: nothing is sent until a caller that may enable it does (PATCH {"enabled": true}) and so becomes its owner`;
}
