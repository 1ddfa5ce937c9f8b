import type { FastifyRequest } from 'fastify';
import type { IdempotencyClaim } from '../http/idempotency.js';
import { accessOf, type RequestAccess } from './access.js';
import type { Principal } from './principals.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's context, resolved with its principal; null on public routes and before authentication. */
    context: RequestContext | null;
  }
}

/**
 * Everything about who asks that a path serving the request decides from, resolved once, when the
 * request is authenticated (authenticate.ts): what it may see and do (its access), what its own
 * rate budget is sized by, the id that traces it (and that its audit records and any operation it
 * starts carry), and the Idempotency-Key it came with, in the scope of its caller. Routes,
 * batches, imports, exports, expand, the event stream, webhook endpoints, operations and the rate
 * limits take this value, never the principal, so no path decides access its own way.
 */
export interface RequestContext {
  access: RequestAccess;
  budget: CallerBudget;
  /** The request's id (X-Request-Id): its trace. */
  requestId: string;
  idempotency: IdempotencyClaim;
}

/**
 * What the caller's own rate budget is sized by (rate-limits/rate-limiter.ts policyOf): its role,
 * and a limit set for it alone; both null for an external issuer's subject.
 */
export type CallerBudget = Pick<Principal, 'role' | 'rateLimit'>;

/** What a principal's requests share: made once, never changed after. */
interface Resolved {
  access: RequestAccess;
  budget: CallerBudget;
  idempotencyScope: string;
}

/**
 * What each principal resolves to, made once: the authenticator hands out the same principal
 * while it is fresh, so a request pays for no copy of its scopes.
 */
const resolved = new WeakMap<Principal, Resolved>();

/** The context of a request its principal authenticated. */
export function contextOf(request: FastifyRequest, principal: Principal): RequestContext {
  let known = resolved.get(principal);
  if (known === undefined) {
    const access = accessOf(principal);
    const budget = { role: principal.role, rateLimit: principal.rateLimit };
    known = { access, budget, idempotencyScope: idempotencyScopeOf(access) };
    resolved.set(principal, known);
  }
  const key = request.headers['idempotency-key'];
  return {
    access: known.access,
    budget: known.budget,
    requestId: request.id,
    idempotency: { key: typeof key === 'string' ? key : undefined, scope: known.idempotencyScope },
  };
}

/**
 * Whose Idempotency-Keys: each caller's (or external subject's) keys are its own, so callers cannot
 * replay each other's responses; and a caller's keys used while acting for a user are that
 * user's, so a token acting for one user never replays what was answered for another.
 */
function idempotencyScopeOf(access: RequestAccess): string {
  const who = access.callerId !== null ? `caller:${access.callerId}` : `external:${access.name}`;
  return access.userId === null ? who : `${who}:user:${access.userId}`;
}
