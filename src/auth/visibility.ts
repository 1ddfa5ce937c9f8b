import { SEES_ALL, type EventSight, type Sight } from '../db/visibility.js';
import {
  isOwnedResource,
  reachOfGrants,
  readableResources,
  seesAllOperations,
  type OwnedResource,
  type Reach,
  type StoredGrants,
} from './policy.js';
import type { Principal } from './principals.js';

/**
 * What decides what a request sees: its caller, the resources that caller sees only its own
 * records of, and the user it acts for.
 */
export type Seer = Pick<Principal, 'callerId' | 'ownRecords' | 'userId'>;

/**
 * Which records of a resource a request may see (docs/access.md): a request that acts for a user
 * sees that user's record and orders only, whatever its caller could see (items as its caller
 * does: they belong to no user); else every record, or only those its caller created, as the
 * caller's record access says. The one place this is decided; the Sight it returns is what every
 * query of users, items and orders composes with (db/visibility.ts). A request without a
 * principal (rowi's own work) and an external issuer's subject that acts for no user (which is no
 * caller, so owns nothing) see by their scopes alone.
 */
export function sightOf(principal: Seer | null, resource: OwnedResource): Sight {
  if (principal === null) return SEES_ALL;
  if (principal.userId !== null && resource !== 'items') return { owner: null, user: principal.userId };
  if (principal.callerId === null || !principal.ownRecords.has(resource)) return SEES_ALL;
  return { owner: principal.callerId, user: null };
}

/**
 * Which events a request (or a webhook endpoint's owner) sees: of each resource it may read
 * (policy.ts readableResources), the events of the records it sees there, as sightOf says; every
 * event of the others. The event list, the stream and webhooks all filter by this.
 */
export function eventSightOf(reach: Reach): EventSight {
  return new Map(readableResources(reach).map((resource) => [resource, sightOnCollection(reach, resource)] as const));
}

/** What a webhook endpoint's owner sees of the events now, from its grants as stored (outbox/webhook-owners.ts). */
export function eventSightOfOwner(ownerId: number | null, grants: StoredGrants): EventSight {
  return eventSightOf(reachOfGrants(grants, ownerId));
}

/** The sight of a request on a collection: sightOf for an owned resource, every record of any other. */
export function sightOnCollection(principal: Seer | null, collection: string): Sight {
  return isOwnedResource(collection) ? sightOf(principal, collection) : SEES_ALL;
}

/** The owner of a record the request creates: its caller; null for an external issuer's subject. */
export function creatorOf(principal: Seer | null): number | null {
  return principal?.callerId ?? null;
}

/**
 * Which operations (imports) a request sees: every one for a caller that sees all operations (an
 * admin, policy.ts seesAllOperations), otherwise only those its caller started; an external
 * issuer's subject, which is no caller, starts none and sees none.
 */
export function sightOnOperations(principal: Pick<Principal, 'callerId' | 'scopes'>): Sight {
  if (seesAllOperations(principal.scopes)) return SEES_ALL;
  return { owner: principal.callerId ?? -1, user: null };
}
