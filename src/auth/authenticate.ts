import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { AuthenticationError, ForbiddenError } from '../errors.js';
import {
  missingScopes,
  permissionOf,
  securityOf,
  type DeclaredPermission,
  type Permission,
  type Scope,
} from './policy.js';
import { BEARER_CHALLENGE, challenge } from './challenge.js';
import { contextOf } from './context.js';
import type { Authenticator, Principal } from './principals.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Credentials checking, with the caches a change of caller or key must clear. */
    auth: Authenticator;
  }
  interface FastifyRequest {
    /** The authenticated caller; null on public routes and before authentication. */
    principal: Principal | null;
    /** What the request's route needs; null on public routes and for unknown paths. */
    permission: Permission | null;
  }
  interface FastifyContextConfig {
    /** What the route needs, from its declared scope and its URL. */
    permission?: Permission;
  }
}

/** Longer credentials are refused outright: rowi's keys are 57 characters, its tokens under 1 KB. */
const MAX_CREDENTIAL_LENGTH = 4096;
/** Query parameters that would carry credentials into logs, proxies and browser history. */
const CREDENTIALS_IN_QUERY = /[?&](?:api[_-]?key|access_token|x-api-key)=/i;

/**
 * Authentication and authorisation, in one place (docs/security.md): every route declares a permission
 * (registering one without fails at start), and every request is checked in onRequest, before
 * its body is read or validated, so a caller without access learns nothing from the answer.
 * The check is bound to each route when it is registered, so a request pays for no look-up of
 * what its route needs.
 */
export function registerAuthentication(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorate('auth', authenticator);
  app.decorateRequest('principal', null);
  app.decorateRequest('context', null);
  app.decorateRequest('permission', null);
  app.addHook('onRoute', (route) => guard(route, authenticator));
  // Every request, public routes and unknown paths too: credentials in a URL are refused.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.url.includes('?') && CREDENTIALS_IN_QUERY.test(request.url)) {
      done(
        malformed(
          'Credentials are not accepted in the query string, where logs and proxies keep them; send the key in X-API-Key or a token in Authorization.',
        ),
      );
      return;
    }
    done();
  });
  app.addHook('onClose', async () => authenticator.close());
}

/**
 * Refuses a route without a permission; puts the check of a protected one first in its onRequest
 * hooks, and its security requirement in its schema.
 */
function guard(route: RouteOptions, authenticator: Authenticator): void {
  const schema = route.schema as
    { 'x-permission'?: DeclaredPermission; 'x-also-scopes'?: readonly Scope[]; security?: unknown } | undefined;
  const scope = schema?.['x-permission'];
  if (schema === undefined || scope === undefined) {
    throw new Error(
      `${String(route.method)} ${route.url} declares no permission: give its operation() a permission (a scope, 'authenticated' or 'public')`,
    );
  }
  // The OpenAPI document (generated from these schemas when first asked for) says which credentials it takes.
  schema.security = securityOf(scope);
  const declared = permissionOf(scope, route.url);
  // An operation that needs several scopes whatever its URL (an import creates and changes records) names the others.
  const also = schema['x-also-scopes'] ?? [];
  const permission = { ...declared, also: [...new Set([...declared.also, ...also])] };
  route.config = { ...route.config, permission };
  if (permission.scope === 'public') return;
  const check = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) =>
    authenticate(authenticator, permission, request, done);
  const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
  route.onRequest = [check, ...own];
}

function authenticate(
  authenticator: Authenticator,
  permission: Permission,
  request: FastifyRequest,
  done: HookHandlerDoneFunction,
): void {
  request.permission = permission;
  let principal: Principal | Promise<Principal>;
  try {
    principal = principalOf(authenticator, request);
  } catch (error) {
    done(error as Error);
    return;
  }
  if (principal instanceof Promise) {
    principal.then(
      (resolved) => done(authorize(request, resolved, permission)),
      (error: Error) => done(error),
    );
  } else {
    done(authorize(request, principal, permission));
  }
}

/** On a public route that describes its caller: the principal when credentials came, else null (bad ones: 401). */
export async function optionalPrincipal(
  authenticator: Authenticator,
  request: FastifyRequest,
): Promise<Principal | null> {
  return hasCredentials(request) ? principalOf(authenticator, request) : null;
}

/** Whether the request carries a credential (valid or not): an API key or an Authorization header. */
export function hasCredentials(request: FastifyRequest): boolean {
  return request.headers['x-api-key'] !== undefined || request.headers.authorization !== undefined;
}

function principalOf(authenticator: Authenticator, request: FastifyRequest): Principal | Promise<Principal> {
  const key = request.headers['x-api-key'];
  const authorization = request.headers.authorization;
  if (key !== undefined && authorization !== undefined) {
    throw malformed('Send one credential: an API key in X-API-Key or a token in Authorization, not both.');
  }
  if (key !== undefined) {
    if (typeof key !== 'string') throw malformed('X-API-Key is empty.');
    if (key.length > MAX_CREDENTIAL_LENGTH)
      throw malformed(`X-API-Key is longer than ${MAX_CREDENTIAL_LENGTH} characters.`);
    const trimmed = key.trim();
    if (trimmed === '') throw malformed('X-API-Key is empty.');
    return authenticator.authenticateKey(trimmed);
  }
  if (authorization !== undefined) {
    if (authorization.length > MAX_CREDENTIAL_LENGTH)
      throw malformed(`Authorization is longer than ${MAX_CREDENTIAL_LENGTH} characters.`);
    const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization);
    if (match === null) {
      if (/^Bearer\s*$/i.test(authorization) || authorization.trim() === '')
        throw malformed('Authorization names no token.');
      throw new AuthenticationError(
        'invalid-credentials',
        'Authorization must be "Bearer <token>" (RFC 6750); for an API key use the X-API-Key header.',
        challenge('invalid_token', 'Authorization must be Bearer <token>'),
      );
    }
    return authenticator.authenticateToken(match[1]!);
  }
  throw new AuthenticationError(
    'missing-credentials',
    'This operation needs credentials: an API key in X-API-Key, or a bearer token in Authorization.',
    BEARER_CHALLENGE,
  );
}

/**
 * The request's credentials checked again, as they stand now, against what its route needs: for
 * a response that outlives the moment it was authorised (an event stream). Throws the 401 or 403
 * the request would get if it came now.
 */
export function authenticateAgain(
  authenticator: Authenticator,
  request: FastifyRequest,
): Principal | Promise<Principal> {
  const permission = request.permission!;
  const permitted = (principal: Principal): Principal => {
    const refusal = refusalOf(principal, permission);
    if (refusal !== undefined) throw refusal;
    return principal;
  };
  const principal = principalOf(authenticator, request);
  return principal instanceof Promise ? principal.then(permitted) : permitted(principal);
}

/**
 * Undefined when the principal may proceed; the 403 otherwise. The request's context is resolved
 * here, once, with its principal: a refused request is audited as its caller's too.
 */
function authorize(request: FastifyRequest, principal: Principal, permission: Permission): ForbiddenError | undefined {
  request.principal = principal;
  request.context = contextOf(request, principal);
  return refusalOf(principal, permission);
}

function refusalOf(principal: Principal, permission: Permission): ForbiddenError | undefined {
  const missing = missingScopes(principal.scopes, permission);
  if (missing.length === 0) return undefined;
  const detail = `${principal.name} may not do this: it lacks ${missing.join(' and ')}.`;
  return new ForbiddenError(detail, [...missing], challenge('insufficient_scope', detail, missing.join(' ')));
}

function malformed(detail: string): AuthenticationError {
  return new AuthenticationError('malformed-credentials', detail, challenge('invalid_request', detail));
}
