import { isOwnedResource, isScope, type OwnedResource } from './policy.js';
import type { Principal } from './principals.js';

/**
 * What a request may see and do, as one value that outlives the request: its credential, its caller
 * (id and name), its scopes, the resources it sees only its own records of, and the user it acts
 * for. Built from the request's principal in one place (accessOf); what auth/visibility.ts decides
 * from (sightOf, creatorOf) and what a service takes as its reader. An import stores it with its
 * operation and runs with it, restored exactly, in whichever process or thread runs it
 * (docs/access.md "Every path"): never rebuilt from the operation's row.
 */
export interface RequestAccess {
  credential: Principal['credential'];
  /** The caller's id; null for the subject of an external issuer's token. */
  callerId: number | null;
  /** The caller's name, or the external token's subject. */
  name: string;
  scopes: ReadonlySet<string>;
  ownRecords: ReadonlySet<string>;
  /** The user the request acts for; null: none. */
  userId: number | null;
}

/** The access of a request, from its principal. */
export function accessOf(principal: Principal | RequestAccess): RequestAccess {
  return {
    credential: principal.credential,
    callerId: principal.callerId,
    name: principal.name,
    scopes: new Set(principal.scopes),
    ownRecords: new Set(principal.ownRecords),
    userId: principal.userId,
  };
}

/** The stored form of an access: JSON, with its sets as sorted arrays. */
interface StoredAccess {
  credential: RequestAccess['credential'];
  caller_id: number | null;
  name: string;
  scopes: string[];
  own_records: OwnedResource[];
  user_id: number | null;
}

export function storedAccessOf(access: RequestAccess): string {
  const stored: StoredAccess = {
    credential: access.credential,
    caller_id: access.callerId,
    name: access.name,
    scopes: [...access.scopes].sort(),
    own_records: [...access.ownRecords].filter(isOwnedResource).sort(),
    user_id: access.userId,
  };
  return JSON.stringify(stored);
}

/** The kinds of credential a request may come with. */
export const CREDENTIALS = ['api_key', 'oauth', 'external'] as const satisfies readonly RequestAccess['credential'][];
const isId = (value: unknown): value is number | null =>
  value === null || (typeof value === 'number' && Number.isSafeInteger(value) && value > 0);

/**
 * The access as stored; undefined when there is none (an operation stored before access was) or
 * it is not one this rowi wrote: then nothing may run with it. Scopes this rowi does not know are
 * left out, never added.
 */
export function accessFromStored(text: string | null): RequestAccess | undefined {
  if (text === null) return undefined;
  let stored: Partial<StoredAccess>;
  try {
    stored = JSON.parse(text) as Partial<StoredAccess>;
  } catch {
    return undefined;
  }
  if (
    typeof stored !== 'object' ||
    stored === null ||
    !(CREDENTIALS as readonly string[]).includes(stored.credential as string) ||
    !isId(stored.caller_id) ||
    !isId(stored.user_id) ||
    typeof stored.name !== 'string' ||
    !Array.isArray(stored.scopes) ||
    !Array.isArray(stored.own_records)
  )
    return undefined;
  return {
    credential: stored.credential!,
    callerId: stored.caller_id,
    name: stored.name,
    scopes: new Set(stored.scopes.filter((scope) => typeof scope === 'string' && isScope(scope))),
    ownRecords: new Set(
      stored.own_records.filter((resource) => typeof resource === 'string' && isOwnedResource(resource)),
    ),
    userId: stored.user_id,
  };
}
