// The bench's "no auth" variant of rowi, for measuring what authentication and the audit trail
// cost: the same Fastify app as buildApp in src/app.ts (same options, the same cross-cutting
// registrations in the same order, the same routes, SQLite storage and logger, all from dist/),
// minus registerAuthentication and registerAudit and the routes that exist only for them
// (callers, audit events, OAuth). It keeps the other resources' routes although the bench loads
// only GET /v1/users/{id}: rowi's per-request cost grows a little with the routes it has (about
// 3 µs of CPU per request measured with users alone), and that is not the cost of authentication.
//
// It exists only here: rowi itself has no setting that turns authentication off. Keep it in step
// with buildApp when that changes. Run as a program, it reads settings as `rowi serve` does
// (ROWI_*) and logs "listening on <url>/v1" on stdout as rowi does; imported, it offers
// buildUnauthenticatedApp({ config, storage, logger }).
import { pathToFileURL } from 'node:url';
import Fastify, { LogController } from 'fastify';
import { registerAccessLog } from '../dist/src/app.js';
import { contextOf } from '../dist/src/auth/context.js';
import { ALL_SCOPES, securitySchemes } from '../dist/src/auth/policy.js';
import { MOVEMENT_EXPANSION, ORDER_EXPANSION } from '../dist/src/api/related-records.js';
import { loadConfig } from '../dist/src/config/config.js';
import { openStorage } from '../dist/src/db/connect.js';
import { migrateToLatest } from '../dist/src/db/migrate.js';
import { registerDraining } from '../dist/src/http/draining.js';
import { registerLingeringClose } from '../dist/src/http/lingering-close.js';
import { registerLoadShedding } from '../dist/src/http/load-shedding.js';
import { IDEMPOTENCY_KEYS_RETENTION } from '../dist/src/http/idempotency.js';
import { startRetention } from '../dist/src/db/retention.js';
import { RouteTable } from '../dist/src/http/not-allowed.js';
import { registerOpenApi, registerOpenApiRoute } from '../dist/src/http/openapi.js';
import { frameworkErrorHandler, registerProblemHandlers } from '../dist/src/http/problem.js';
import { registerRepresentations } from '../dist/src/http/representation.js';
import { registerRequestId, requestIdOf, requestLogger } from '../dist/src/http/request-id.js';
import { registerHsts, transportOptions } from '../dist/src/http/transport.js';
import { registerHandlerTimeout } from '../dist/src/http/timeouts.js';
import { completeRoute } from '../dist/src/http/route-completion.js';
import { serializerFactory } from '../dist/src/http/serializers.js';
import { registerQueryTextCheck } from '../dist/src/http/text.js';
import { validatorCompiler } from '../dist/src/http/validation.js';
import { registerRateLimits } from '../dist/src/rate-limits/rate-limit.js';
import { RateLimiter } from '../dist/src/rate-limits/rate-limiter.js';
import { createLogger } from '../dist/src/observability/logger.js';
import itemsRoutes from '../dist/src/resources/items/items.routes.js';
import stockRoutes from '../dist/src/resources/items/stock.routes.js';
import ordersRoutes from '../dist/src/resources/orders/orders.routes.js';
import { API_DESCRIPTION, API_TAGS } from '../dist/src/api/description.js';
import { API_EXAMPLES } from '../dist/src/api/examples.js';
import rootRoutes from '../dist/src/resources/root/root.routes.js';
import healthRoutes from '../dist/src/resources/health/health.routes.js';
import usersRoutes from '../dist/src/resources/users/users.routes.js';
import { VERSION } from '../dist/src/version.js';

const EVERY_SCOPE = Object.freeze({
  credential: 'api_key',
  callerId: null,
  name: 'bench',
  scopes: new Set(ALL_SCOPES),
  ownRecords: new Set(),
  userId: null,
  role: 'admin',
  rateLimit: null,
});

/** buildApp, line by line, without the two registrations this variant leaves out. */
export async function buildUnauthenticatedApp({ config, storage, logger }) {
  const { db } = storage;
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestIdOf,
    childLoggerFactory: requestLogger,
    bodyLimit: config.bodyLimit,
    exposeHeadRoutes: true,
    return503OnClosing: false,
    forceCloseConnections: false,
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: frameworkErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: serializerFactory() } },
    ...transportOptions(config),
  });

  const routeTable = new RouteTable();
  app.decorate('config', config);
  app.decorate('db', db);
  app.decorate('storage', storage);
  app.decorate('routeTable', routeTable);
  app.setValidatorCompiler(validatorCompiler);
  app.addHook('onRoute', (route) => {
    routeTable.add(route);
    completeRoute(route);
  });

  registerRequestId(app);
  registerHsts(app, config);
  registerRepresentations(app);
  registerQueryTextCheck(app);
  registerProblemHandlers(app, routeTable);
  registerDraining(app, config);
  registerLingeringClose(app);
  registerHandlerTimeout(app, config);
  registerLoadShedding(app, config);
  registerAccessLog(app);
  // Left out: registerAudit(app, …) and registerAuthentication(app, …). Only the request
  // decorations of registerAuthentication are kept, so requests have the same shape as rowi's and
  // code that reads request.context (the rate limits) sees "nobody" rather than undefined.
  app.decorateRequest('principal', null);
  app.decorateRequest('context', null);
  // Counted as rowi counts (without a principal, per client address), so the comparison with rowi
  // measures credentials and the audit trail, not rate limiting as well.
  registerRateLimits(app, await RateLimiter.create(config, storage.describe, logger));
  // Without authentication every request may do everything: the handlers, which tell a caller only
  // what it may read (an order's references, the stock it lacks), see a caller holding every scope.
  app.addHook('preHandler', (request, _reply, done) => {
    request.principal = EVERY_SCOPE;
    request.context = contextOf(request, EVERY_SCOPE);
    done();
  });
  await registerOpenApi(app, {
    version: VERSION,
    description: API_DESCRIPTION,
    tags: API_TAGS,
    securitySchemes: securitySchemes(),
    examples: API_EXAMPLES,
    publicUrl: config.publicUrl,
  });

  await app.register(rootRoutes, { version: VERSION });
  await app.register(healthRoutes, { version: VERSION });
  await app.register(usersRoutes);
  await app.register(itemsRoutes);
  await app.register(stockRoutes, { movements: MOVEMENT_EXPANSION });
  await app.register(ordersRoutes, { expansion: ORDER_EXPANSION });
  // Left out: callersRoutes, auditRoutes and oauthRoutes (they need app.auth).
  registerOpenApiRoute(app);

  // Expired Idempotency-Key records pruned as app.ts prunes them (db/retention.ts).
  const retention = startRetention(db, [IDEMPOTENCY_KEYS_RETENTION], app.log);
  app.addHook('onClose', () => retention.stop());

  return app;
}

// Run as a program (not imported): serve as `rowi serve` does, on the configured database.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const config = loadConfig(process.env, {});
  const logger = createLogger(config);
  const storage = await openStorage(config, logger);
  await migrateToLatest(storage.db);
  const app = await buildUnauthenticatedApp({ config, storage, logger });
  const address = await app.listen({ host: config.host, port: config.port });
  logger.info(
    { url: `${address}/v1`, storage: storage.describe },
    `listening on ${address}/v1 (bench only: no authentication, no audit trail)`,
  );
  process.on('SIGTERM', async () => {
    await app.close();
    await storage.close();
    process.exit(0);
  });
}
