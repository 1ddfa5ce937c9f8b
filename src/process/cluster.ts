import closeWithGrace from 'close-with-grace';
import { scheduleBackups } from '../db/backup-schedule.js';
import cluster, { type Worker } from 'node:cluster';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ConfigError, type Config } from '../config/config.js';
import { openStorage, type Storage } from '../db/connect.js';
import { relayWorkerSignals } from '../db/signals.js';
import { WorkersDamage } from '../db/corruption.js';
import {
  announce,
  CLOSING_MARGIN_MS,
  migrate,
  openCheckedStorage,
  serveHandedConnections,
  setOrigin,
} from './startup.js';
import { createLogger } from '../observability/logger.js';
import { listenOrigin } from '../http/transport.js';
import { aggregateWorkerMetrics, workerMetrics } from './cluster-metrics.js';
import { countWorkerAuthFailures } from '../rate-limits/auth-failures.js';

/**
 * `rowi serve --workers N`: the primary migrates the database, forks N workers, and once they are
 * ready listens on the port itself and deals each connection it accepts to the next worker
 * (round robin), which serves it as its own; it creates the first admin once it listens, replaces
 * a worker that dies, and drains them all on SIGTERM/SIGINT. Each worker is a whole rowi with its
 * own database pool.
 *
 * The primary holds the listening socket rather than node:cluster, because of the drain: to end
 * without resetting any request, the process that accepts connections must stop accepting first
 * and then give every connection it accepted to a worker that is still serving. node:cluster keeps
 * accepting until the last worker has closed, then closes the connections it still holds (which
 * their clients see as resets). Here the primary stops accepting, then tells the workers to drain;
 * a connection it had accepted reaches its worker before that message (one ordered channel), and
 * is served like the others (http/draining.ts).
 */
type WorkerMessage =
  | { type: 'rowi:ready' }
  | { type: 'rowi:failed'; message: string; config: boolean }
  | { type: 'rowi:origin'; origin: string }
  | { type: 'rowi:connection' }
  | { type: 'rowi:shutdown' };

const isWorkerMessage = (message: unknown): message is WorkerMessage =>
  typeof message === 'object' &&
  message !== null &&
  typeof (message as { type?: unknown }).type === 'string' &&
  (message as { type: string }).type.startsWith('rowi:');

/** A worker that dies this soon after it started is not restarted (it would die again). */
const RESTART_MIN_UPTIME_MS = 2000;

export async function serveAsPrimary(config: Config, count: number): Promise<void> {
  const logger = createLogger(config);
  const damage = new WorkersDamage();
  const storage = await openCheckedStorage(config, logger, (detail, checked) =>
    damage.found(detail, checked.corruption),
  );
  try {
    await migrate(storage, logger);
  } catch (error) {
    await storage.close();
    throw error;
  }
  relayWorkerSignals();
  aggregateWorkerMetrics();
  countWorkerAuthFailures();

  let shuttingDown = false;
  let listener: Server | undefined;
  let origin: string | undefined;
  const started = new Map<Worker, number>();
  /** Workers that said they are ready, in the order connections go to them. */
  const serving: Worker[] = [];
  let next = 0;
  const fork = () => {
    const worker = cluster.fork();
    started.set(worker, Date.now());
    worker.on('message', (message: unknown) => {
      if (!isWorkerMessage(message) || message.type !== 'rowi:ready') return;
      serving.push(worker);
      damage.ready(worker);
      // A replacement, once the primary listens: it needs the origin the others were given.
      if (origin !== undefined) worker.send({ type: 'rowi:origin', origin } satisfies WorkerMessage);
    });
    return worker;
  };

  /** Hands a connection to the next worker that serves; closes it when there is none left. */
  const deal = (socket: Socket) => {
    for (let tries = 0; tries < serving.length; tries++) {
      const worker = serving[next++ % serving.length]!;
      if (!worker.isConnected()) continue;
      worker.send({ type: 'rowi:connection' } satisfies WorkerMessage, socket, { keepOpen: false }, (error) => {
        if (error) socket.destroy();
      });
      return;
    }
    socket.destroy();
  };

  let ready = false;
  const stop = (signal: NodeJS.Signals) => {
    if (shuttingDown) return;
    shuttingDown = true;
    const workers = [...started.keys()];
    if (!ready) {
      // Stopped while starting: nothing has been served yet; no worker is left behind.
      logger.info({ signal }, 'stopped while starting');
      for (const worker of workers) worker.process.kill('SIGKILL');
      listener?.close();
      void storage.close().finally(() => logger.flush(() => process.exit(0)));
      return;
    }
    logger.info({ signal }, 'shutting down: every worker finishes its in-flight requests');
    // No new connection from now on; the workers drain the ones they have.
    listener?.close();
    let failed = false;
    let left = workers.length;
    const done = async () => {
      clearTimeout(deadline);
      logger.info('stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      process.exit(failed ? 1 : 0);
    };
    const deadline = setTimeout(
      () => {
        logger.error('workers did not stop within the shutdown timeout; killing them');
        failed = true;
        for (const worker of workers) worker.process.kill('SIGKILL');
      },
      config.shutdownTimeout + CLOSING_MARGIN_MS + 2000,
    );
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

  // Every worker is ready, or the start fails as a whole (a bad certificate fails in each worker);
  // then the port is opened, so that no connection waits for a worker still starting.
  await new Promise<void>((resolve, reject) => {
    let readyWorkers = 0;
    const settle = (outcome: () => void) => {
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
      outcome();
    };
    const onMessage = (_worker: Worker, message: unknown) => {
      if (!isWorkerMessage(message)) return;
      if (message.type === 'rowi:failed')
        settle(() => reject(message.config ? new ConfigError(message.message) : new Error(message.message)));
      else if (message.type === 'rowi:ready' && ++readyWorkers === count) settle(resolve);
    };
    // A worker that dies before it could say why (a crash while starting).
    const onExit = (worker: Worker, code: number, signal: string) =>
      settle(() =>
        reject(
          new Error(
            `worker process ${worker.process.pid} ended while starting (exit code ${code}${signal ? `, ${signal}` : ''})`,
          ),
        ),
      );
    cluster.on('message', onMessage);
    cluster.on('exit', onExit);
  })
    .then(async () => {
      listener = createServer({ pauseOnConnect: true }, deal);
      await new Promise<void>((resolve, reject) => {
        listener!.once('error', reject);
        listener!.listen({ host: config.host, port: config.port }, () => resolve());
      });
      origin = listenOrigin(config, listener.address() as AddressInfo);
      for (const worker of serving) worker.send({ type: 'rowi:origin', origin } satisfies WorkerMessage);
    })
    .catch(async (error: unknown) => {
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
    const at = serving.indexOf(worker);
    if (at !== -1) serving.splice(at, 1);
    if (shuttingDown) return;
    logger.error({ pid: worker.process.pid, code, signal }, 'a worker process ended unexpectedly');
    if (uptime < RESTART_MIN_UPTIME_MS) {
      logger.error('the worker ended right after it started; not restarting it');
      return;
    }
    fork();
  });

  try {
    await announce(config, storage, logger, origin!, `${count} worker processes`);
  } catch (error) {
    // The start fails as a whole (the database refused the first admin): no worker is left serving.
    shuttingDown = true;
    for (const worker of started.keys()) worker.process.kill('SIGKILL');
    listener?.close();
    await storage.close();
    throw error;
  }
  // The workers have their own connections; the primary's would only count against the server's limit.
  await storage.close();
  // Scheduled backups run here, once for all workers, on a thread of their own.
  scheduleBackups(config, logger);
  ready = true;
}

export async function serveAsWorker(config: Config): Promise<void> {
  const logger = createLogger(config).child({ worker: cluster.worker?.id });
  // The channel to the primary broke (the primary was killed): there is no one to serve for.
  cluster.worker?.on('error', (error) => {
    logger.warn({ err: error }, 'lost the primary process; exiting');
    process.exit(1);
  });
  let storage: Storage | undefined;
  let app: FastifyInstance;
  try {
    storage = await openStorage(config, logger);
    app = await serveHandedConnections(config, storage, logger, workerMetrics());
  } catch (error) {
    const message: WorkerMessage = {
      type: 'rowi:failed',
      message: (error as Error).message,
      config: error instanceof ConfigError,
    };
    process.send!(message, () => process.exit(error instanceof ConfigError ? 2 : 1));
    return;
  }
  const opened = storage;
  // The primary forwards SIGTERM/SIGINT as a message (a terminal's Ctrl-C reaches every process
  // of the group, so workers leave SIGINT to the primary); a SIGTERM sent to a worker also works.
  const graceful = closeWithGrace(
    {
      delay: config.shutdownTimeout + CLOSING_MARGIN_MS,
      skip: ['SIGINT'],
      onSecondSignal: () => {},
      logger: { error: (message: unknown) => logger.error(message) },
    },
    async ({ err }) => {
      if (err) logger.error({ err }, 'fatal error, shutting down');
      await app.close();
      await opened.close();
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      if (app.drainedCleanly === false) throw new Error('requests were cut off at the shutdown time-out');
    },
  );
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    void graceful.close();
  };
  process.on('message', (message: unknown, handle?: Socket) => {
    if (!isWorkerMessage(message)) return;
    if (message.type === 'rowi:connection' && handle !== undefined) {
      // A connection the primary accepted: served as if this process had accepted it.
      app.server.emit('connection', handle);
      handle.resume();
    } else if (message.type === 'rowi:origin') {
      setOrigin(app, message.origin);
    } else if (message.type === 'rowi:shutdown') {
      close();
    }
  });
  // A primary that is gone (killed) leaves no one to hand out connections: finish and go too.
  process.on('disconnect', close);
  process.send!({ type: 'rowi:ready' } satisfies WorkerMessage);
}
