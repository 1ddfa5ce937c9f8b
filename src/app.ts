import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { AuditLog, auditWriterFor, registerAudit } from './audit-trail/audit-log.js';
import { auditTrailRetention } from './audit-trail/audit.repository.js';
import { registerAuthentication } from './auth/authenticate.js';
import oauthRoutes from './auth/oauth.routes.js';
import { Authenticator } from './auth/principals.js';
import { TokenService } from './auth/tokens.js';
import type { Config } from './config/config.js';
import type { Commits } from './db/commits.js';
import type { Storage } from './db/connect.js';
import type { Db } from './db/database.js';
import { registerCors } from './http/cors.js';
import { registerConsolePage } from './http/console-page.js';
import { registerDocsPage } from './http/docs-page.js';
import { registerDraining } from './http/draining.js';
import { registerLingeringClose } from './http/lingering-close.js';
import { registerLoadShedding } from './http/load-shedding.js';
import { registerHsts, transportOptions } from './http/transport.js';
import { registerHandlerTimeout } from './http/timeouts.js';
import { IDEMPOTENCY_KEYS_RETENTION } from './http/idempotency.js';
import { RouteTable, registerShadowedRoutes } from './http/not-allowed.js';
import { registerQueryNameCheck } from './http/query-parameters.js';
import { registerOpenApi, registerOpenApiRoute } from './http/openapi.js';
import { frameworkErrorHandler, pathOf, registerProblemHandlers } from './http/problem.js';
import { registerRepresentations } from './http/representation.js';
import { registerQueryTextCheck } from './http/text.js';
import { registerTrailingSlashRedirect } from './http/trailing-slash.js';
import { registerContentDecoding } from './http/content-encoding.js';
import { budgetSpender, registerRateLimits } from './rate-limits/rate-limit.js';
import { RateLimiter } from './rate-limits/rate-limiter.js';
import { registerRequestId, requestIdOf, requestLogger } from './http/request-id.js';
import { securitySchemes } from './auth/policy.js';
import { eventSightOfOwner } from './auth/visibility.js';
import { completeRoute } from './http/route-completion.js';
import { serializerFactory } from './http/serializers.js';
import { validatorCompiler } from './http/validation.js';
import { API_DESCRIPTION, API_TAGS } from './api/description.js';
import { API_EXAMPLES } from './api/examples.js';
import rootRoutes from './resources/root/root.routes.js';
import healthRoutes from './resources/health/health.routes.js';
import limitsRoutes from './resources/limits/limits.routes.js';
import itemsRoutes from './resources/items/items.routes.js';
import stockRoutes from './resources/items/stock.routes.js';
import ordersRoutes from './resources/orders/orders.routes.js';
import { MOVEMENT_EXPANSION, ORDER_EXPANSION } from './api/related-records.js';
import usersRoutes from './resources/users/users.routes.js';
import callersRoutes from './resources/callers/callers.routes.js';
import auditRoutes from './resources/audit/audit.routes.js';
import weatherRoutes from './resources/weather/weather.routes.js';
import { upstreamWeatherFor, type UpstreamWeather } from './upstream/upstream-weather.js';
import eventsRoutes from './resources/events/events.routes.js';
import webhookEndpointsRoutes from './resources/webhook-endpoints/webhook-endpoints.routes.js';
import type { Wakes } from './outbox/outbox-worker.js';
import { startEvents } from './outbox/readers.js';
import type { Dispatching } from './outbox/webhook-standby.js';
import { eventTables } from './outbox/retention.js';
import { startRetention, type Retention } from './db/retention.js';
import { VERSION } from './version.js';
import { registry, watchBackups, watchReadCache } from './observability/metrics.js';
import { readBackupStatus } from './db/backup-schedule.js';
import { registerRequestMetrics } from './http/request-metrics.js';
import metricsRoutes from './resources/metrics/metrics.routes.js';
import operationsRoutes from './resources/operations/operations.routes.js';
import backupsRoutes from './resources/backups/backups.routes.js';
import { backupsUnavailable, startBackupRunner } from './resources/backups/backups.service.js';
import importsRoutes, { operationsRetention } from './engine/imports/imports.routes.js';
import { startImportRunner, type ImportElsewhere } from './engine/imports/runner.js';
import { IMPORTERS } from './api/importers.js';
import { declareResources, type ResourceModule } from './engine/resource.js';
import { importDirectoryOf } from './config/limits.settings.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    db: Db;
    storage: Storage;
    /** Every registered route, for 405/Allow and for checking the OpenAPI document. */
    routeTable: RouteTable;
    /** The upstream weather provider behind its cache and breaker; undefined when none is configured. */
    weather: UpstreamWeather | undefined;
    /** The background pruning of the tables that grow (a sweep can be run at once: the tests). */
    retention: Retention;
  }
}

export interface AppDependencies {
  config: Config;
  storage: Storage;
  logger: FastifyBaseLogger;
  /** The metrics exposition: this process's, unless a --workers worker asks its primary for all of them. */
  collectMetrics?: () => Promise<string>;
  /** Where imports and webhook delivery may run off the event loop; without it, both run on it. */
  threads?: AppThreads;
  /**
   * Resources declared beside rowi's own (engine/resource.ts; docs/architecture.md "Adding a
   * resource"): their operations join the API and the document, their imports run on the event loop.
   */
  resources?: readonly ResourceModule[];
}

/**
 * How the process starts the threads that take work off the event loop that answers requests
 * (process/import-thread.ts, process/webhook-thread.ts). The process wires them in: the app only
 * says when each is wanted. Each answers undefined where its work stays on the event loop.
 */
export interface AppThreads {
  imports(config: Config, log: FastifyBaseLogger, commits: Commits): ImportElsewhere | undefined;
  webhooks(
    config: Config,
    log: FastifyBaseLogger,
    userAgent: string,
  ): ((feed: Wakes, owner: string) => Dispatching) | undefined;
}

/**
 * The whole HTTP application, wired in the order it must be: cross-cutting concerns first
 * (request id, representations, problems, OpenAPI), then the resources. The caller owns the
 * database and closes it after the app.
 */
export async function buildApp(dependencies: AppDependencies): Promise<FastifyInstance> {
  // Before any route: the schemas and the document list the declared resources' scopes and events.
  const undeclare = declareResources(dependencies.resources ?? []);
  try {
    return await assemble(dependencies, undeclare);
  } catch (error) {
    undeclare();
    throw error;
  }
}

async function assemble(
  { config, storage, logger, collectMetrics = () => registry.metrics(), threads, resources = [] }: AppDependencies,
  undeclare: () => void,
): Promise<FastifyInstance> {
  const { db } = storage;
  const app = Fastify({
    loggerInstance: logger,
    // Fastify's two lines per request are replaced by one access-log line (registerAccessLog).
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestIdOf,
    childLoggerFactory: requestLogger,
    bodyLimit: config.bodyLimit,
    exposeHeadRoutes: true,
    // registerDraining serves requests that arrive on open connections while closing (with
    // Connection: close), and closes idle connections itself, once they are quiet.
    return503OnClosing: false,
    forceCloseConnections: false,
    // The drain runs in a close hook and may take ROWI_SHUTDOWN_TIMEOUT by design; avvio gives each
    // hook pluginTimeout (10 s by default) and fails the close (AVV_ERR_READY_TIMEOUT) past it.
    pluginTimeout: config.shutdownTimeout + 10_000,
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: frameworkErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: serializerFactory() } },
    ...transportOptions(config),
  });

  const readCache = db.readCache;
  if (readCache !== undefined) watchReadCache(() => readCache.stats());
  const routeTable = new RouteTable();
  app.addHook('onClose', async () => undeclare());
  app.decorate('config', config);
  app.decorate('db', db);
  app.decorate('storage', storage);
  app.decorate('routeTable', routeTable);
  const weather = upstreamWeatherFor(config, logger);
  app.decorate('weather', weather);
  app.addHook('onClose', async () => weather?.close());
  app.setValidatorCompiler(validatorCompiler);
  app.addHook('onRoute', (route) => {
    routeTable.add(route);
    completeRoute(route);
  });

  registerRequestId(app);
  // A request its client abandoned has no response done: the access log and the audit trail hear of it here.
  registerRequestMetrics(app, (request, reply, status) => {
    logAbandoned(request, reply, status);
    auditAbandoned(request, reply, status);
  });
  await registerCors(app, config.corsOrigins, routeTable);
  registerHsts(app, config);
  registerTrailingSlashRedirect(app, routeTable);
  registerShadowedRoutes(app, routeTable);
  registerRepresentations(app);
  registerQueryTextCheck(app);
  registerProblemHandlers(app, routeTable, db.outage);
  registerDraining(app, config);
  registerLingeringClose(app);
  registerHandlerTimeout(app, config);
  registerLoadShedding(app, config);
  registerAccessLog(app);
  const audit = new AuditLog(auditWriterFor(storage), logger, config.auditFlushInterval);
  const auditAbandoned = registerAudit(app, audit, { reads: config.auditReads === 'true' });
  registerAuthentication(
    app,
    new Authenticator(db, new TokenService(db, config, storage.signals, logger), logger, storage.signals),
  );
  // After the refusal of credentials in a query string (registerAuthentication's), before any credential is checked.
  registerQueryNameCheck(app);
  registerRateLimits(app, await RateLimiter.create(config, storage.describe, logger));
  registerContentDecoding(app);
  await registerOpenApi(app, {
    version: VERSION,
    description: API_DESCRIPTION,
    tags: API_TAGS,
    securitySchemes: securitySchemes(),
    examples: API_EXAMPLES,
    publicUrl: config.publicUrl,
  });

  await app.register(rootRoutes, { version: VERSION });
  await app.register(healthRoutes, { version: VERSION, auditTrail: () => audit.state() });
  await app.register(limitsRoutes);
  if (config.backupDir !== '') {
    const folder = config.backupDir;
    watchBackups(async () => {
      const status = await readBackupStatus(folder);
      const at = status?.last_success_at;
      return { lastSuccess: at ? Date.parse(at) / 1000 : undefined, failures: status?.failures ?? 0 };
    });
  }
  await app.register(metricsRoutes, { collect: collectMetrics });
  await app.register(usersRoutes);
  await app.register(itemsRoutes);
  await app.register(stockRoutes, { movements: MOVEMENT_EXPANSION });
  await app.register(ordersRoutes, { expansion: ORDER_EXPANSION });
  await app.register(weatherRoutes);
  await app.register(callersRoutes);
  await app.register(auditRoutes);
  for (const resource of resources) await app.register(resource.routes);
  const importers = [...IMPORTERS, ...resources.flatMap((resource) => (resource.import ? [resource.import] : []))];
  // Imports run in the background, in every process: each runs the files it received (docs/bulk.md "Imports").
  const imports = startImportRunner({
    db,
    log: logger,
    targets: importers,
    elsewhere: threads?.imports(config, logger, db.commits),
    concurrency: config.importConcurrency,
    callerConcurrency: Math.min(config.importCallerConcurrency, config.importConcurrency),
    // An orders import spends the caller's orders-create budget as it runs, as POST /v1/orders does.
    budgets: (budget, reader) => budgetSpender(app.rateLimiter, budget, reader),
    directory: importDirectoryOf(config),
  });
  app.addHook('onClose', () => imports.close());
  await app.register(importsRoutes, { runner: imports, targets: importers });
  const importTargets = importers.map((target) => target.name);
  await app.register(operationsRoutes, { importTargets });
  // Backups over HTTP run in the process that took the request, under the lease its import runner renews.
  const backups =
    backupsUnavailable(config) === undefined
      ? startBackupRunner({
          db,
          log: logger,
          data: config.data,
          folder: config.backupDir,
          keep: config.backupKeep,
          leases: imports,
        })
      : undefined;
  if (backups !== undefined) app.addHook('onClose', () => backups.close());
  await app.register(backupsRoutes, { runner: backups, importTargets });
  // The feed wakes after each commit that wrote events (db.commits), and on the signals of other processes.
  const events = startEvents({
    db,
    commits: db.commits,
    signals: storage.signals,
    config,
    log: logger,
    userAgent: `rowi-webhooks/${VERSION}`,
    readableBy: eventSightOfOwner,
    dispatchElsewhere: threads?.webhooks(config, logger, `rowi-webhooks/${VERSION}`),
  });
  app.addHook('onClose', () => events.close());
  await app.register(eventsRoutes, { feed: events.feed, config });
  await app.register(webhookEndpointsRoutes, { config, policy: events.policy });
  await app.register(oauthRoutes);
  registerOpenApiRoute(app);
  registerDocsPage(app);
  registerConsolePage(app);

  // The tables that grow with use, pruned past their retention (docs/limits.md "Data kept and its retention").
  const retention = startRetention(
    db,
    [
      auditTrailRetention(config.auditRetention),
      ...eventTables(config.eventsRetention),
      IDEMPOTENCY_KEYS_RETENTION,
      operationsRetention(config.importRetention),
    ],
    logger,
  );
  app.addHook('onClose', () => retention.stop());
  app.decorate('retention', retention);

  return app;
}

/**
 * The line of a request whose client closed its connection before the answer was sent whole: an
 * aborted upload, a client that gave up waiting. It is the client's doing, said at info like any
 * request, with no stack (docs/conventions.md, "Tracing").
 */
function logAbandoned(request: FastifyRequest, reply: FastifyReply, status: number): void {
  request.log.info(
    { method: request.method, path: pathOf(request), status, ms: Math.round(reply.elapsedTime * 10) / 10 },
    status === 499
      ? 'request abandoned: the client closed its connection before the answer'
      : 'answer cut off: the client closed its connection before its end',
  );
}

/** One line per request, written when the response is done; the path only (no query string). */
export function registerAccessLog(app: FastifyInstance): void {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
        method: request.method,
        path: pathOf(request),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request completed',
    );
    done();
  });
}
