import Type from 'typebox';
import { setting } from './serving.settings.js';

/** The settings of who may call and how much: tokens and external issuers, rate limits, time limits, load shedding, the audit trail's flush. */
export const LIMIT_SETTINGS = {
  tokenLifetime: setting(
    Type.Integer({
      minimum: 60,
      maximum: 86_400,
      default: 900,
      description: 'seconds an access token from `POST /oauth/token` lasts',
    }),
    'ROWI_TOKEN_LIFETIME',
  ),
  jwtIssuer: setting(
    Type.String({
      default: '',
      pattern: '^$|^https?://\\S+$',
      'x-error': 'must be an http:// or https:// URL',
      description:
        'issuer (`iss`) of external bearer tokens rowi accepts, with `ROWI_JWT_AUDIENCE` and `ROWI_JWT_JWKS_URL` (all three together); unset: none',
    }),
    'ROWI_JWT_ISSUER',
  ),
  jwtAudience: setting(
    Type.String({ default: '', description: 'audience (`aud`) external bearer tokens must name' }),
    'ROWI_JWT_AUDIENCE',
  ),
  jwtJwksUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^https?://\\S+$',
      'x-error': 'must be an http:// or https:// URL',
      description: 'JWKS URL of the external issuer (cached; fetched again on an unknown `kid`)',
    }),
    'ROWI_JWT_JWKS_URL',
  ),
  jwtAlgorithms: setting(
    Type.String({
      default: 'RS256,ES256,PS256,EdDSA',
      pattern:
        '^(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA)(,(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA))*$',
      'x-error': 'must be a comma-separated list of asymmetric JWS algorithms (RS256, PS256, ES256, EdDSA…)',
      description: 'signature algorithms accepted on external bearer tokens (never `none` or HS*)',
    }),
    'ROWI_JWT_ALGORITHMS',
  ),
  // Limits: docs/operations.md "Limits".
  rateLimitAnonymous: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 60,
      description: 'requests per minute per client address without credentials; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ANONYMOUS',
  ),
  rateLimitReader: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 600,
      description:
        "requests per minute per caller with the reader role (a caller's own `rate_limit` wins); `0`: unlimited",
    }),
    'ROWI_RATE_LIMIT_READER',
  ),
  rateLimitEditor: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 1200,
      description: 'requests per minute per caller with the editor role; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_EDITOR',
  ),
  rateLimitAdmin: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 1200,
      description: 'requests per minute per caller with the admin role; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ADMIN',
  ),
  rateLimitOrdersCreate: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 300,
      description: '`POST /v1/orders` per minute per caller, within its overall budget; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ORDERS_CREATE',
  ),
  authFailureLimit: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 10,
      description:
        'requests with invalid credentials (a key, a token, or a client secret by HTTP Basic or form) per minute per client address before it gets 429; `0`: unlimited',
    }),
    'ROWI_AUTH_FAILURE_LIMIT',
  ),
  redisUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^rediss?://\\S+$',
      'x-error': 'must be a redis:// (or rediss://) URL',
      'x-secret': true,
      description:
        '`redis://host:6379`: rate-limit counters shared by every instance; unset: each instance counts alone',
    }),
    'ROWI_REDIS_URL',
  ),
  headersTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 600_000,
      default: 10_000,
      description: 'milliseconds a client has to send the request line and headers',
    }),
    'ROWI_HEADERS_TIMEOUT',
  ),
  requestTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 3_600_000,
      default: 30_000,
      description: 'milliseconds a client has to send the whole request, body included',
    }),
    'ROWI_REQUEST_TIMEOUT',
  ),
  keepAliveTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 600_000,
      default: 72_000,
      description: "milliseconds an idle kept-alive connection stays open (longer than a load balancer's idle timeout)",
    }),
    'ROWI_KEEP_ALIVE_TIMEOUT',
  ),
  handlerTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 15_000,
      description: 'milliseconds a request may take once received before rowi answers 503',
    }),
    'ROWI_HANDLER_TIMEOUT',
  ),
  maxEventLoopDelay: setting(
    Type.Integer({
      minimum: 0,
      maximum: 60_000,
      default: 1000,
      description: 'milliseconds of event-loop lag above which rowi sheds load (503); `0`: never',
    }),
    'ROWI_MAX_EVENT_LOOP_DELAY',
  ),
  maxHeapUsed: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 0,
      description: 'megabytes of V8 heap in use above which rowi sheds load (503); `0`: never',
    }),
    'ROWI_MAX_HEAP_USED',
  ),
  auditFlushInterval: setting(
    Type.Integer({
      minimum: 10,
      maximum: 60_000,
      default: 1000,
      description: 'milliseconds between batched writes of the audit trail',
    }),
    'ROWI_AUDIT_FLUSH_INTERVAL',
  ),
};
