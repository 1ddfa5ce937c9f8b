import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { AppError } from '../errors.js';
import { MEDIA_TYPES } from '../http/negotiate.js';
import { operation, representation, RESPONSE_HEADERS } from '../http/schemas.js';
import { isVisibleUser } from './acting.repository.js';
import { ACT_FOR_USERS, ALL_SCOPES, mayUseWhileActing, parseScopeList } from './policy.js';
import { sightOf } from './visibility.js';
import type { Principal } from './principals.js';

const FORM = 'application/x-www-form-urlencoded';

const TokenRequestSchema = Type.Object(
  {
    grant_type: Type.String({ description: 'client_credentials' }),
    scope: Type.Optional(
      Type.String({ description: 'space-separated scopes to narrow the token to; default: all the caller holds' }),
    ),
    client_id: Type.Optional(Type.String({ description: "the caller's name, when not sent by HTTP Basic" })),
    client_secret: Type.Optional(
      Type.String({ description: "one of the caller's API keys, when not sent by HTTP Basic" }),
    ),
    user_id: Type.Optional(
      Type.String({
        description:
          'the id of a user the token is to act for (docs/access.md "Acting for a user"): it then sees only that user\'s record (GET /v1/users/me) and orders, and carries only the scopes of records (those of data resources, orders:cancel, events:read, operations:*). The caller needs users:act and must see the user',
      }),
    ),
  },
  { additionalProperties: true, title: 'TokenRequest' },
);

const TokenSchema = Type.Object(
  {
    access_token: Type.String({ description: 'a JWT (RFC 9068); send it as Authorization: Bearer <token>' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'seconds until it expires' }),
    scope: Type.String({ description: 'the scopes it carries, space-separated' }),
  },
  { additionalProperties: false, title: 'Token' },
);

const OAuthErrorSchema = Type.Object(
  {
    error: Type.Union(
      ['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope'].map((code) =>
        Type.Literal(code),
      ),
    ),
    error_description: Type.String(),
  },
  { additionalProperties: false, title: 'OAuthError' },
);

const JwksSchema = Type.Object(
  {
    keys: Type.Array(
      Type.Object({ kid: Type.String(), kty: Type.String(), alg: Type.String() }, { additionalProperties: true }),
    ),
  },
  { additionalProperties: false, title: 'JWKS' },
);

const MetadataSchema = Type.Object(
  {
    issuer: Type.String(),
    token_endpoint: Type.String(),
    jwks_uri: Type.String(),
    grant_types_supported: Type.Array(Type.String()),
    token_endpoint_auth_methods_supported: Type.Array(Type.String()),
    scopes_supported: Type.Array(Type.String()),
    response_types_supported: Type.Array(Type.String()),
  },
  { additionalProperties: false, title: 'AuthorizationServerMetadata' },
);

type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_scope';

/** RFC 6749 §5.2: the token endpoint's errors are its own JSON, not problems. */
class OAuthError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly basicChallenge = false,
  ) {
    super(description);
  }
}

/**
 * OAuth 2.0 client credentials (RFC 6749 §4.4): a caller trades its name and one of its API keys
 * for a short-lived JWT access token (RFC 9068), optionally narrowed by `scope`. The keys that
 * verify the tokens and the server's metadata are published for clients and other services.
 */
const oauthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { auth } = app;

  // Form bodies are taken here only: the rest of the API speaks JSON and XML.
  app.addContentTypeParser(FORM, { parseAs: 'string' }, (_request, body, done) =>
    done(null, parseForm(body as string)),
  );

  // A body the token endpoint cannot take (JSON, no Content-Type, …) is an OAuth invalid_request
  // (RFC 6749 §5.2), which OAuth clients understand, rather than a 415 problem; everything
  // else goes on to rowi's problem handler.
  app.setErrorHandler((error: Error & { statusCode?: number; status?: number }, request, reply) => {
    if ((error.statusCode ?? error.status) !== 415 || request.routeOptions.url !== '/oauth/token') throw error;
    noStore(reply);
    return reply.code(400).send({
      error: 'invalid_request',
      error_description: 'The body must be a form (application/x-www-form-urlencoded) with grant_type.',
    });
  });

  app.post(
    '/oauth/token',
    {
      attachValidation: true,
      // Client credentials may come as form fields, which only this route reads: the failed-
      // authentication throttle must count those too, not only Authorization and X-API-Key, and
      // against the client id and the key they name.
      config: { authenticatesClient: { presented: presentedClient, issued: issuedToken } },
      schema: operation({
        operationId: 'issueToken',
        permission: 'public',
        summary: 'Get an access token (OAuth 2.0 client credentials)',
        description:
          'Client authentication by HTTP Basic (client_secret_basic) or form fields (client_secret_post): the client id is the ' +
          "caller's name, the secret one of its API keys. Errors follow RFC 6749 §5.2.",
        tags: ['auth'],
        body: TokenRequestSchema,
        consumes: [FORM],
        jsonFixedBy: 'RFC 6749 (§5.1, §5.2)',
        // Bodies that are not forms are invalid_request (400), and the form is checked by the handler.
        omitProblems: [415, 422],
        response: {
          200: representation(TokenSchema, 'The access token', {}, ['json']),
          400: {
            description:
              'RFC 6749 §5.2 error; or, for a request refused before its form is read (credentials or a NUL in the query string), a problem',
            headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
            content: {
              'application/json': { schema: OAuthErrorSchema },
              [MEDIA_TYPES.json.problem]: { schema: { $ref: 'Problem#' } },
            },
          },
          401: {
            description: 'invalid_client (RFC 6749 §5.2)',
            headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
            content: { 'application/json': { schema: OAuthErrorSchema } },
          },
        },
      }),
    },
    async (request, reply) => {
      try {
        // Before the schema's verdict: a repeated declared parameter (scope) also fails validation.
        const form = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Record<
          string,
          string | string[]
        >;
        const repeated = Object.keys(form).find((name) => Array.isArray(form[name]));
        if (repeated) throw new OAuthError('invalid_request', `The parameter ${repeated} is given more than once.`);
        if (request.validationError || typeof request.body !== 'object' || request.body === null) {
          throw new OAuthError(
            'invalid_request',
            'The body must be a form (application/x-www-form-urlencoded) with grant_type.',
          );
        }
        const fields = form as Record<string, string>;
        if (fields.grant_type !== 'client_credentials') {
          throw new OAuthError('unsupported_grant_type', 'Only grant_type=client_credentials is supported.');
        }
        const principal = await authenticateClient(request.headers.authorization, fields);
        const userId = fields.user_id === undefined ? null : await actingUser(principal, fields.user_id);
        const scopes = grantedScopes(principal, fields.scope, userId !== null);
        const token = await auth.tokens.issue({ id: principal.callerId!, name: principal.name }, scopes, userId);
        noStore(reply);
        return reply.send({
          access_token: token,
          token_type: 'Bearer',
          expires_in: auth.tokens.lifetime,
          scope: scopes.join(' '),
        });
      } catch (error) {
        if (!(error instanceof OAuthError)) throw error;
        noStore(reply);
        if (error.basicChallenge) reply.header('www-authenticate', 'Basic realm="rowi", charset="UTF-8"');
        return reply
          .code(error.code === 'invalid_client' ? 401 : 400)
          .send({ error: error.code, error_description: error.description });
      }
    },
  );

  app.get(
    '/.well-known/jwks.json',
    {
      schema: operation({
        operationId: 'getJwks',
        permission: 'public',
        summary: "Public keys that verify rowi's access tokens (RFC 7517)",
        tags: ['auth'],
        jsonFixedBy: 'RFC 7517 (§5)',
        response: { 200: representation(JwksSchema, 'The key set', {}, ['json']) },
      }),
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return { keys: await auth.tokens.publishedKeys() };
    },
  );

  app.get(
    '/.well-known/oauth-authorization-server',
    {
      schema: operation({
        operationId: 'getAuthorizationServerMetadata',
        permission: 'public',
        summary: 'OAuth 2.0 authorization server metadata (RFC 8414)',
        tags: ['auth'],
        jsonFixedBy: 'RFC 8414 (§3.2)',
        response: { 200: representation(MetadataSchema, 'The metadata', {}, ['json']) },
      }),
    },
    async () => {
      const issuer = auth.tokens.issuer;
      return {
        issuer,
        token_endpoint: `${issuer}/oauth/token`,
        jwks_uri: `${issuer}/.well-known/jwks.json`,
        grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
        scopes_supported: [...ALL_SCOPES],
        response_types_supported: [],
      };
    },
  );

  /**
   * The user a token is asked to act for: the caller must hold users:act and see the user (a
   * channel acts only for its own customers); one it cannot see is answered as one that does not exist.
   */
  async function actingUser(principal: Principal, text: string): Promise<number> {
    if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text)))
      throw new OAuthError('invalid_request', 'user_id must be the id of a user (a positive integer).');
    if (!principal.scopes.has(ACT_FOR_USERS))
      throw new OAuthError('invalid_scope', `The caller does not hold ${ACT_FOR_USERS}, which user_id needs.`);
    const userId = Number(text);
    if (!(await isVisibleUser(app.db, userId, sightOf(principal, 'users'))))
      throw new OAuthError('invalid_request', `There is no user ${userId}.`);
    return userId;
  }

  /** RFC 6749 §2.3.1: Basic with form-urlencoded id and secret, or both in the body; never both ways. */
  async function authenticateClient(
    authorization: string | undefined,
    fields: Record<string, string>,
  ): Promise<Principal> {
    const { clientId, secret, basic } = clientCredentialsOf(authorization, fields);
    let principal: Principal;
    try {
      principal = await auth.authenticateKey(secret);
    } catch (error) {
      if (error instanceof AppError)
        throw new OAuthError('invalid_client', 'The client id or secret is not valid.', basic);
      throw error;
    }
    if (principal.name !== clientId)
      throw new OAuthError('invalid_client', 'The client id or secret is not valid.', basic);
    return principal;
  }
};

/**
 * The client id and secret of a token request (RFC 6749 §2.3.1): by HTTP Basic, form-urlencoded, or
 * both in the form; never both ways. Throws the OAuth error of credentials sent wrong or not at all.
 */
function clientCredentialsOf(
  authorization: string | undefined,
  fields: Record<string, string | string[]>,
): { clientId: string; secret: string; basic: boolean } {
  let clientId = typeof fields.client_id === 'string' ? fields.client_id : undefined;
  let secret = typeof fields.client_secret === 'string' ? fields.client_secret : undefined;
  const basic = authorization !== undefined && /^Basic /i.test(authorization);
  if (basic) {
    if (fields.client_secret !== undefined)
      throw new OAuthError('invalid_request', 'Send the client secret by HTTP Basic or in the form, not both.');
    const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1)
      throw new OAuthError('invalid_client', 'HTTP Basic credentials must be client_id:client_secret.', true);
    try {
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
    } catch {
      throw new OAuthError('invalid_client', 'HTTP Basic credentials are not form-urlencoded.', true);
    }
  }
  if (clientId === undefined || secret === undefined || secret === '') {
    throw new OAuthError(
      'invalid_client',
      'Client authentication is missing: HTTP Basic, or client_id and client_secret in the form.',
      true,
    );
  }
  return { clientId, secret, basic };
}

/**
 * What a token request presents, for the failed-authentication budget (rate-limits/): its client id
 * and secret when they can be read (nothing when they cannot: the request then spends its
 * address's budget only).
 */
function presentedClient(request: FastifyRequest): { client?: string; credential?: string } {
  const form = typeof request.body === 'object' && request.body !== null ? request.body : {};
  try {
    const { clientId, secret } = clientCredentialsOf(
      request.headers.authorization,
      form as Record<string, string | string[]>,
    );
    return { client: clientId, credential: secret };
  } catch {
    return {};
  }
}

/** The access token a token response issued (a credential rowi made, valid from its first use). */
function issuedToken(payload: unknown): string | undefined {
  if (typeof payload !== 'string') return undefined;
  try {
    const token = (JSON.parse(payload) as { access_token?: unknown }).access_token;
    return typeof token === 'string' ? token : undefined;
  } catch {
    return undefined;
  }
}

/**
 * RFC 6749 §3.3: the scopes asked for, each of which the caller must hold; all it holds by default.
 * A token acting for a user gets only the scopes acting allows (policy.ts mayUseWhileActing).
 */
function grantedScopes(principal: Principal, requested: string | undefined, acting: boolean): string[] {
  const usable = (scope: string) => principal.scopes.has(scope) && (!acting || mayUseWhileActing(scope));
  if (requested === undefined) return ALL_SCOPES.filter(usable);
  const asked = [...new Set(parseScopeList(requested))];
  if (asked.length === 0)
    throw new OAuthError('invalid_scope', 'scope is empty; leave it out to get every scope the caller holds.');
  const refused = asked.filter((scope) => !principal.scopes.has(scope));
  if (refused.length > 0) throw new OAuthError('invalid_scope', `The caller does not hold ${refused.join(', ')}.`);
  const notWhileActing = asked.filter((scope) => !usable(scope));
  if (notWhileActing.length > 0)
    throw new OAuthError(
      'invalid_scope',
      `A token acting for a user cannot carry ${notWhileActing.join(', ')}: acting is for one user's records.`,
    );
  return asked;
}

/** RFC 6749 §5.1: token responses must not be cached. */
function noStore(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

/** A form as an object; a repeated name becomes an array (refused by the token endpoint). */
function parseForm(body: string): Record<string, string | string[]> {
  const form: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of new URLSearchParams(body)) {
    const existing = form[name];
    form[name] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  return form;
}

export default oauthRoutes;
