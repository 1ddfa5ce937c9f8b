import type { FastifyRequest } from 'fastify';
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
 * request is authenticated (authenticate.ts): what it may see and do (its access), the id that
 * traces it (and that its audit record and any operation it starts carry), and the Idempotency-Key
 * it came with. Routes, batches, imports, exports, expand, the event stream and operations take
 * this value, never the principal, so no path decides access its own way. What a request spends
 * of its rate budgets is not in it: the limiter decides that after authentication, from the
 * caller's role and its own limit, which are not access (rate-limits/rate-limit.ts).
 */
export interface RequestContext {
  access: RequestAccess;
  /** The request's id (X-Request-Id): its trace. */
  requestId: string;
  /** The Idempotency-Key the request came with; undefined: none, or not one header. */
  idempotencyKey: string | undefined;
}

/**
 * The access of each principal, made once: the authenticator hands out the same principal while
 * it is fresh, so a request pays for no copy of its scopes. An access is never changed once made.
 */
const accesses = new WeakMap<Principal, RequestAccess>();

/** The context of a request its principal authenticated. */
export function contextOf(request: FastifyRequest, principal: Principal): RequestContext {
  let access = accesses.get(principal);
  if (access === undefined) {
    access = accessOf(principal);
    accesses.set(principal, access);
  }
  const key = request.headers['idempotency-key'];
  return { access, requestId: request.id, idempotencyKey: typeof key === 'string' ? key : undefined };
}
