import { SEES_ALL, type EventSight, type Sight } from '../db/visibility.js';
import { AppError } from '../errors.js';
import {
  actingMayCreate,
  actingNarrows,
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
 * Which records of a resource a request may see (docs/access.md): every record, or only those its
 * caller created, as the caller's record access says; a request that acts for a user sees, of
 * those, that user's record and orders only (acting narrows: it never sees more than its caller),
 * and items as its caller does (they belong to no user: a resource declared without a user
 * column, policy.ts actingNarrows). The one place this is decided; the Sight it returns is what
 * every query of an owned table composes with (db/visibility.ts). A request without a principal
 * (rowi's own work) and an external issuer's subject that acts for no user (which is no caller,
 * so owns nothing) see by their scopes alone.
 */
export function sightOf(principal: Seer | null, resource: OwnedResource): Sight {
  if (principal === null) return SEES_ALL;
  const owner = principal.callerId !== null && principal.ownRecords.has(resource) ? principal.callerId : null;
  const user = principal.userId !== null && actingNarrows(resource) ? principal.userId : null;
  return owner === null && user === null ? SEES_ALL : { owner, user };
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

/**
 * The owner of a record of `resource` the request creates: its caller; null for an external
 * issuer's subject. A request acting for a user creates no users or items, nor any resource
 * declared so (403 acting-forbidden, docs/access.md): acting serves one person, whose orders it
 * places; a customer's app may not reserve other emails or add to the catalogue. Every path that
 * creates asks here.
 */
export function creatorOf(principal: Seer | null, resource: OwnedResource): number | null {
  assertMayCreate(principal, resource);
  return principal?.callerId ?? null;
}

/** 403 acting-forbidden when the request acts for a user and `resource` is one acting may not create. */
export function assertMayCreate(principal: Seer | null, resource: string): void {
  if (principal === null || principal.userId === null || actingMayCreate(resource)) return;
  throw new AppError(
    'acting-forbidden',
    `A request acting for user ${principal.userId} may not create ${resource}: acting serves one person. Create ${resource} with the caller's own credentials.`,
  );
}

/**
 * Which operations (imports, backups) a request sees: every one for a caller that sees all
 * operations (an admin, policy.ts seesAllOperations), otherwise only those its caller started; a
 * request acting for a user, only those started by a request acting for that user with the same
 * caller (an admin's too). An external issuer's subject, which is no caller, sees none.
 */
export function sightOnOperations(principal: Pick<Principal, 'callerId' | 'scopes' | 'userId'>): Sight {
  const owner = principal.callerId ?? -1;
  if (principal.userId !== null) return { owner, user: principal.userId };
  if (seesAllOperations(principal.scopes)) return SEES_ALL;
  return { owner, user: null };
}
