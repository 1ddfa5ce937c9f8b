import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { optionalPrincipal } from '../../auth/authenticate.js';
import { MAX_LIMIT } from '../../http/paging.js';
import { operation, representation, closedObject } from '../../http/schemas.js';

const Budget = (description: string) =>
  Type.Union(
    [
      Type.Object(
        {
          policy: Type.String({ description: 'the name in RateLimit-Policy and RateLimit headers' }),
          quota: Type.Integer({ description: 'requests per window' }),
          window_seconds: Type.Integer(),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ],
    { description: `${description}; null: unlimited` },
  );

const LimitsSchema = Type.Object(
  {
    rate_limit: Budget("the caller's own budget (the client address's, without credentials)"),
    orders_create: Budget('orders placed (POST /v1/orders, each order of a batch or an import), on top of rate_limit'),
    failed_authentication: Budget(
      'requests with invalid credentials per client address, and per API key or client id named, before 429',
    ),
    counted: Type.String({ description: 'instance: each instance counts alone; redis: shared by every instance' }),
    body_limit_bytes: Type.Integer({ description: 'larger request bodies get 413' }),
    page_size_max: Type.Integer({ description: 'the largest limit a collection takes' }),
    imports: Type.Object(
      {
        file_bytes_max: Type.Integer({ description: 'the largest file an import takes (413 import-too-large)' }),
        running_max: Type.Integer({ description: "the caller's imports that run at once; the others wait queued" }),
        queued_max: Type.Union([Type.Integer(), Type.Null()], {
          description: 'imports the caller may have waiting (429 import-queue-full); null: unlimited',
        }),
        queued_bytes_max: Type.Union([Type.Integer(), Type.Null()], {
          description: "bytes the caller's waiting files may hold together (429 import-queue-full); null: unlimited",
        }),
      },
      { additionalProperties: false, description: 'what the caller may upload and have waiting (docs/bulk.md)' },
    ),
    timeouts_ms: Type.Object(
      {
        headers: Type.Integer({ description: 'to send the request line and headers' }),
        request: Type.Integer({ description: 'to send the whole request' }),
        keep_alive: Type.Integer({ description: 'an idle kept-alive connection stays open' }),
        handler: Type.Integer({ description: 'rowi takes at most this long to answer before a 503' }),
        database: Type.Integer({ description: 'a wait for the database before a 503' }),
      },
      { additionalProperties: false },
    ),
  },
  closedObject('limits', 'Limits'),
);

/**
 * GET /v1/limits: every limit that applies to the caller, so that it can stay within them
 * before it meets one (docs/limits.md). Public: without credentials it describes the client address's
 * budget; with them, the caller's.
 */
const limitsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { config, rateLimiter } = app;
  app.get(
    '/v1/limits',
    {
      schema: operation({
        operationId: 'getLimits',
        permission: 'public',
        summary: 'The rate limits, sizes and time-outs that apply to the caller',
        description:
          "The caller's rate limits (its requests a minute, placing orders, failed authentication, and where they are counted), the largest body and page, what it may upload and have waiting to import, and the time-outs. Public: without credentials, those of an anonymous caller; an invalid key is 401 as anywhere.",
        tags: ['service'],
        // Public, but credentials sent are checked: an invalid key is 401, as anywhere.
        problems: [401],
        response: { 200: representation(LimitsSchema, "The caller's limits") },
      }),
    },
    async (request) => {
      const principal = await optionalPrincipal(app.auth, request);
      const budget = (policy: { name: string; quota: number; windowSeconds: number } | undefined) =>
        policy === undefined
          ? null
          : { policy: policy.name, quota: policy.quota, window_seconds: policy.windowSeconds };
      return {
        rate_limit: budget(rateLimiter.policyOf(principal)),
        orders_create: principal === null ? null : budget(rateLimiter.budgetPolicy('orders-create')),
        failed_authentication: budget(rateLimiter.failurePolicy()),
        counted: rateLimiter.sharing,
        body_limit_bytes: config.bodyLimit,
        page_size_max: MAX_LIMIT,
        imports: {
          file_bytes_max: config.importMaxBytes,
          running_max: Math.min(config.importCallerConcurrency, config.importConcurrency),
          queued_max: config.importQueueMax === 0 ? null : config.importQueueMax,
          queued_bytes_max: config.importQueueBytes === 0 ? null : config.importQueueBytes,
        },
        timeouts_ms: {
          headers: config.headersTimeout,
          request: config.requestTimeout,
          keep_alive: config.keepAliveTimeout,
          handler: config.handlerTimeout,
          database: config.databaseTimeout,
        },
      };
    },
  );
};

export default limitsRoutes;
