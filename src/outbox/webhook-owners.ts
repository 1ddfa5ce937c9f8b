import type { Role } from '../db/database.js';
import type { StoredEvent } from './outbox.repository.js';

/**
 * Who a webhook endpoint acts for: its owner, the caller that created it (docs/events.md). The
 * endpoint is sent an event only while its owner exists and may read the resource the event is
 * about, checked from the owner's grants as stored at fan-out and again before each attempt, so
 * that a narrowed, demoted or deleted owner stops its endpoints as it stops its requests.
 */

/** The owner's grants as stored (the callers table), or null when the owner no longer exists. */
export interface OwnerGrants {
  role: Role;
  extra_scopes: string;
  removed_scopes: string;
}

/**
 * The resources a caller with these grants may read now. auth/policy.ts knows the roles; the
 * process hands this in (app.ts), as outbox/ stands below auth/.
 */
export type ReadableBy = (owner: OwnerGrants) => ReadonlySet<string>;

/** Before each attempt the owner's grants are read again once they are older than this. */
export const OWNER_FRESH_MS = 500;

/** The resources an endpoint is sent events of: those it was set up for (JSON), that its owner may read now. */
export function sentResources(resources: string, readable: ReadonlySet<string>): string[] {
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
  readable: ReadonlySet<string> | null,
  event: Pick<StoredEvent, 'type' | 'resource'>,
): string | undefined {
  if (readable === null) return `not sent: ${ownerGone(ownerId)}`;
  if (event.type === 'webhook.ping' || readable.has(event.resource)) return undefined;
  return `not sent: the endpoint's owner (caller ${ownerId}) may no longer read ${event.resource} (${event.resource}:read)`;
}

/** Why an endpoint without an owner is disabled. */
export function ownerGone(ownerId: number | null): string {
  const whose = ownerId === null ? 'it has no owner' : `its owner, caller ${ownerId}, no longer exists`;
  return `${whose}: nothing is sent until a caller that may enable it does (PATCH {"enabled": true}) and so becomes its owner`;
}
