import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { AuthenticationError, ForbiddenError } from '../errors.js';
import { missingScopes, permissionOf, type Permission, type Scope } from './policy.js';
import { BEARER_CHALLENGE, challenge, type Authenticator, type Principal } from './principals.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Credentials checking, with the caches a change of caller or key must clear. */
    auth: Authenticator;
  }
  interface FastifyRequest {
    /** The authenticated caller; null on public routes and before authentication. */
    principal: Principal | null;
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
 * Authentication and authorisation, in one place (SPEC §5): every route declares a permission
 * (registering one without fails at start), and every request is checked in onRequest, before
 * its body is read or validated, so a caller without access learns nothing from the answer.
 */
export function registerAuthentication(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorate('auth', authenticator);
  app.decorateRequest('principal', null);
  app.addHook('onRoute', requirePermission);
  app.addHook('onRequest', (request, reply, done) => authenticate(authenticator, request, reply, done));
  app.addHook('onClose', async () => authenticator.close());
}

function requirePermission(route: RouteOptions): void {
  const scope = (route.schema as { 'x-permission'?: Scope | 'public' } | undefined)?.['x-permission'];
  if (scope === undefined) {
    throw new Error(`${String(route.method)} ${route.url} declares no permission: give its operation() a permission (a scope or 'public')`);
  }
  route.config = { ...route.config, permission: permissionOf(scope, route.url) };
}

function authenticate(authenticator: Authenticator, request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.url.includes('?') && CREDENTIALS_IN_QUERY.test(request.url)) {
    done(malformed('Credentials are not accepted in the query string, where logs and proxies keep them; send the key in X-API-Key or a token in Authorization.'));
    return;
  }
  const permission = request.routeOptions.config.permission;
  // Unknown paths (404/405) and public routes need no credentials.
  if (permission === undefined || permission.scope === 'public') {
    done();
    return;
  }
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

function principalOf(authenticator: Authenticator, request: FastifyRequest): Principal | Promise<Principal> {
  const key = request.headers['x-api-key'];
  const authorization = request.headers.authorization;
  if (key !== undefined && authorization !== undefined) {
    throw malformed('Send one credential: an API key in X-API-Key or a token in Authorization, not both.');
  }
  if (key !== undefined) {
    if (typeof key !== 'string' || key.trim() === '') throw malformed('X-API-Key is empty.');
    if (key.length > MAX_CREDENTIAL_LENGTH) throw malformed(`X-API-Key is longer than ${MAX_CREDENTIAL_LENGTH} characters.`);
    return authenticator.authenticateKey(key.trim());
  }
  if (authorization !== undefined) {
    if (authorization.length > MAX_CREDENTIAL_LENGTH) throw malformed(`Authorization is longer than ${MAX_CREDENTIAL_LENGTH} characters.`);
    const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization);
    if (match === null) {
      if (/^Bearer\s*$/i.test(authorization) || authorization.trim() === '') throw malformed('Authorization names no token.');
      throw new AuthenticationError(
        'invalid-credentials',
        'Authorization must be "Bearer <token>" (RFC 6750); for an API key use the X-API-Key header.',
        challenge('invalid_token', 'Authorization must be Bearer <token>'),
      );
    }
    return authenticator.authenticateToken(match[1]!);
  }
  throw new AuthenticationError('missing-credentials', 'This operation needs credentials: an API key in X-API-Key, or a bearer token in Authorization.', BEARER_CHALLENGE);
}

/** Undefined when the principal may proceed; the 403 otherwise. */
function authorize(request: FastifyRequest, principal: Principal, permission: Permission): ForbiddenError | undefined {
  request.principal = principal;
  const missing = missingScopes(principal.scopes, permission);
  if (missing.length === 0) return undefined;
  const detail = `${principal.name} may not do this: it lacks ${missing.join(' and ')}.`;
  return new ForbiddenError(detail, missing, challenge('insufficient_scope', detail, missing.join(' ')));
}

function malformed(detail: string): AuthenticationError {
  return new AuthenticationError('malformed-credentials', detail, challenge('invalid_request', detail));
}
