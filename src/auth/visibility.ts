import { SEES_ALL, type Sight } from '../db/visibility.js';
import { isOwnedResource, seesAllOperations, type OwnedResource } from './policy.js';
import type { Principal } from './principals.js';

/** What decides what a request sees: its caller, and the resources that caller sees only its own records of. */
export type Seer = Pick<Principal, 'callerId' | 'ownRecords'>;

/**
 * Which records of a resource a request may see (docs/access.md): every record, or only those its
 * caller created, as the caller's record access says. The one place this is decided; the Sight it
 * returns is what every query of users, items and orders composes with (db/visibility.ts).
 * A request without a principal (rowi's own work) and an external issuer's subject (which is no
 * caller, so owns nothing) see by their scopes alone.
 */
export function sightOf(principal: Seer | null, resource: OwnedResource): Sight {
  if (principal === null || principal.callerId === null || !principal.ownRecords.has(resource)) return SEES_ALL;
  return { owner: principal.callerId };
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
  return { owner: principal.callerId ?? -1 };
}
