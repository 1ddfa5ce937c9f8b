import closeWithGrace from 'close-with-grace';
import cluster, { type Worker } from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { ConfigError, type Config } from './config.js';
import { openStorage, type Storage } from './db/connect.js';
import { migrateStorage } from './db/migrate.js';
import { relayWorkerSignals } from './db/signals.js';
import { createLogger } from './logger.js';
import { ensureFirstAdmin } from './resources/callers/callers.service.js';

/**
 * `rowi serve`: open and migrate the database, build the app, listen, and shut down gracefully
 * on SIGTERM/SIGINT — stop accepting, let in-flight requests finish within the shutdown timeout,
 * close the database, exit 0 (1 if the timeout had to cut requests off).
 *
 * With ROWI_WORKERS / --workers N above 1 (0, the default, means one per core), the process
 * becomes the primary of N worker processes that share the port (node:cluster: the primary
 * accepts connections and hands them out). The primary migrates the database before forking and
 * creates the first admin once every worker listens; each worker is a whole rowi with its own
 * pool; a worker that dies is replaced; SIGTERM/SIGINT to the primary drains every worker.
 */
export async function serve(config: Config): Promise<void> {
  if (cluster.isWorker) return serveAsWorker(config);
  const workers = config.workers === 0 ? availableParallelism() : config.workers;
  if (workers <= 1) return serveAlone(config);
  return serveAsPrimary(config, workers);
}

async function serveAlone(config: Config): Promise<void> {
  const logger = createLogger(config);
  const storage = await openStorage(config, logger);
  await migrate(storage, logger);
  const { app, origin } = await listen(config, storage, logger);
  // Only once rowi is listening, so that a start that fails (a bad certificate, a port in use)
  // cannot create the first admin and lose its key.
  await announce(config, storage, logger, origin, 'one process');
  closeWithGrace(
    { delay: config.shutdownTimeout, logger: { error: (message: unknown) => logger.error(message) } },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error, shutting down');
      else logger.info({ signal }, 'shutting down: finishing in-flight requests');
      await app.close();
      await storage.close();
      logger.info('stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  );
}

async function migrate(storage: Storage, logger: Logger): Promise<void> {
  const migrations = await migrateStorage(storage);
  if (migrations.applied.length > 0) logger.info({ applied: migrations.applied }, 'database migrated');
}

async function listen(config: Config, storage: Storage, logger: Logger): Promise<{ app: FastifyInstance; origin: string }> {
  let app;
  try {
    app = await buildApp({ config, storage, logger });
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await app?.close();
    await storage.close();
    throw error;
  }
  const origin = publicOrigin(app.server.address() as AddressInfo, config.tlsCert === '' ? 'http' : 'https');
  // The OAuth issuer is the listen address unless ROWI_PUBLIC_URL says otherwise; only now is the port known.
  if (config.publicUrl === '') app.auth.tokens.issuer = origin;
  return { app, origin };
}

/** Creates the first admin on an empty database, logs "listening" once, and writes the banner. */
async function announce(config: Config, storage: Storage, logger: Logger, origin: string, processes: string): Promise<void> {
  const firstAdmin = await ensureFirstAdmin(storage.db);
  const baseUrl = `${origin}/v1`;
  logger.info({ url: baseUrl, storage: storage.describe, processes }, `listening on ${baseUrl}`);
  // The first admin key goes to the terminal once, never to the log.
  process.stderr.write(
    `\nrowi is serving ${baseUrl} (${storage.describe}, ${processes})\n` +
      (firstAdmin
        ? `\nThe database was empty, so rowi created the admin caller "${firstAdmin.caller.name}". Its API key, shown only this once:\n\n` +
          `  ROWI_KEY=${firstAdmin.key}\n\n` +
          `Keep it somewhere safe; create callers for your systems with it (README: Security).\n`
        : '') +
      `\nTry it (with ROWI_KEY set to an API key):\n` +
      `  curl -s -X POST ${baseUrl}/users -H "X-API-Key: $ROWI_KEY" -H 'Content-Type: application/json' -d '{"name":"Ada Lovelace","email":"ada@example.com"}'\n` +
      `  curl -s ${baseUrl}/users -H "X-API-Key: $ROWI_KEY"\n` +
      `API description: ${baseUrl}/openapi.json\n\n`,
  );
}

/** Messages between the primary and its workers (besides the Signals relay). */
type WorkerMessage =
  | { type: 'rowi:listening'; origin: string }
  | { type: 'rowi:failed'; message: string; config: boolean }
  | { type: 'rowi:shutdown' };

const isWorkerMessage = (message: unknown): message is WorkerMessage =>
  typeof message === 'object' && message !== null && ['rowi:listening', 'rowi:failed', 'rowi:shutdown'].includes((message as { type?: string }).type ?? '');

/** A worker that dies this soon after it started is not restarted (it would die again). */
const RESTART_MIN_UPTIME_MS = 2000;

async function serveAsPrimary(config: Config, count: number): Promise<void> {
  const logger = createLogger(config);
  const storage = await openStorage(config, logger);
  try {
    await migrate(storage, logger);
  } catch (error) {
    await storage.close();
    throw error;
  }
  relayWorkerSignals();

  let shuttingDown = false;
  const started = new Map<Worker, number>();
  const fork = () => started.set(cluster.fork(), Date.now());
  let ready = false;
  const stop = (signal: NodeJS.Signals) => {
    if (shuttingDown) return;
    shuttingDown = true;
    const workers = [...started.keys()];
    if (!ready) {
      // Stopped while starting: nothing has been served yet; no worker is left behind.
      logger.info({ signal }, 'stopped while starting');
      for (const worker of workers) worker.process.kill('SIGKILL');
      void storage.close().finally(() => logger.flush(() => process.exit(0)));
      return;
    }
    logger.info({ signal }, 'shutting down: every worker finishes its in-flight requests');
    let failed = false;
    let left = workers.length;
    const done = async () => {
      clearTimeout(deadline);
      logger.info('stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      process.exit(failed ? 1 : 0);
    };
    const deadline = setTimeout(() => {
      logger.error('workers did not stop within the shutdown timeout; killing them');
      failed = true;
      for (const worker of workers) worker.process.kill('SIGKILL');
    }, config.shutdownTimeout + 2000);
    if (left === 0) void done();
    for (const worker of workers) {
      worker.once('exit', (code) => {
        if (code !== 0) failed = true;
        if (--left === 0) void done();
      });
      if (worker.isConnected()) worker.send({ type: 'rowi:shutdown' } satisfies WorkerMessage);
    }
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  for (let index = 0; index < count; index++) fork();

  // Every worker listens, or the start fails as a whole (a bad certificate fails in each worker).
  const origin = await new Promise<string>((resolve, reject) => {
    let listening = 0;
    const settle = (outcome: () => void) => {
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
      outcome();
    };
    const onMessage = (_worker: Worker, message: unknown) => {
      if (!isWorkerMessage(message)) return;
      if (message.type === 'rowi:failed') settle(() => reject(message.config ? new ConfigError(message.message) : new Error(message.message)));
      else if (message.type === 'rowi:listening' && ++listening === count) settle(() => resolve(message.origin));
    };
    // A worker that dies before it could say why (a crash while starting).
    const onExit = (worker: Worker, code: number, signal: string) =>
      settle(() => reject(new Error(`worker process ${worker.process.pid} ended while starting (exit code ${code}${signal ? `, ${signal}` : ''})`)));
    cluster.on('message', onMessage);
    cluster.on('exit', onExit);
  }).catch(async (error: unknown) => {
    // A signal during the start: stop() ends the process.
    if (shuttingDown) return new Promise<never>(() => {});
    shuttingDown = true;
    for (const worker of started.keys()) worker.kill('SIGKILL');
    await storage.close();
    throw error;
  });

  cluster.on('exit', (worker, code, signal) => {
    const uptime = Date.now() - (started.get(worker) ?? 0);
    started.delete(worker);
    if (shuttingDown) return;
    logger.error({ pid: worker.process.pid, code, signal }, 'a worker process ended unexpectedly');
    if (uptime < RESTART_MIN_UPTIME_MS) {
      logger.error('the worker ended right after it started; not restarting it');
      return;
    }
    fork();
  });

  await announce(config, storage, logger, origin, `${count} worker processes`);
  // The workers have their own connections; the primary's would only count against the server's limit.
  await storage.close();
  ready = true;
}

async function serveAsWorker(config: Config): Promise<void> {
  const logger = createLogger(config).child({ worker: cluster.worker?.id });
  // The channel to the primary broke (the primary was killed): there is no one to serve for.
  cluster.worker?.on('error', (error) => {
    logger.warn({ err: error }, 'lost the primary process; exiting');
    process.exit(1);
  });
  let storage: Storage | undefined;
  let app: FastifyInstance;
  let origin: string;
  try {
    storage = await openStorage(config, logger);
    ({ app, origin } = await listen(config, storage, logger));
  } catch (error) {
    const message: WorkerMessage = { type: 'rowi:failed', message: (error as Error).message, config: error instanceof ConfigError };
    process.send!(message, () => process.exit(error instanceof ConfigError ? 2 : 1));
    return;
  }
  const opened = storage;
  // The primary forwards SIGTERM/SIGINT as a message (a terminal's Ctrl-C reaches every process
  // of the group, so workers leave SIGINT to the primary); a SIGTERM sent to a worker also works.
  const graceful = closeWithGrace(
    { delay: config.shutdownTimeout, skip: ['SIGINT'], onSecondSignal: () => {}, logger: { error: (message: unknown) => logger.error(message) } },
    async ({ err }) => {
      if (err) logger.error({ err }, 'fatal error, shutting down');
      await app.close();
      await opened.close();
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  );
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    void graceful.close();
  };
  process.on('message', (message: unknown) => {
    if (isWorkerMessage(message) && message.type === 'rowi:shutdown') close();
  });
  // A primary that is gone (killed) leaves no one to hand out connections: finish and go too.
  process.on('disconnect', close);
  process.send!({ type: 'rowi:listening', origin } satisfies WorkerMessage);
}

/** The address to tell people: a wildcard listen address is reachable on loopback. */
function publicOrigin(address: AddressInfo, scheme: 'http' | 'https'): string {
  const host = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return `${scheme}://${address.family === 'IPv6' || host.includes(':') ? `[${host}]` : host}:${address.port}`;
}
