import cluster, { type Worker } from 'node:cluster';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { relayWorkerSignals } from '../db/signals.js';
import { WorkersDamage } from '../db/corruption.js';
import { createLogger } from '../observability/logger.js';
import { listenOrigin } from '../http/listen-origin.js';
import { aggregateWorkerMetrics } from './cluster-metrics.js';
import { countWorkerAuthFailures } from '../rate-limits/auth-failures.js';
import { Preparer, PreparerEnded } from './preparer.js';
import { announceListening } from './banner.js';
import { CLOSING_MARGIN_MS } from './closing.js';
import { listenRefusal } from './listen-refusal.js';

/**
 * `rowi serve --workers N`: the primary has its preparer (process/preparer.ts) check the settings
 * and migrate the database, forks N workers once the settings are checked (they load rowi while the
 * preparer migrates, and open the database once it has), and once they are ready listens on the port itself
 * and deals each connection it accepts to the next worker (round robin), which serves it as its
 * own (process/cluster-worker.ts); the preparer creates the first admin once it listens. The
 * primary replaces a worker that dies, and drains them all on SIGTERM/SIGINT. Each worker is a
 * whole rowi with its own database pool; the primary loads none of it (no settings' schemas, no
 * database, no routes): what it uses is in this file's imports, and prom-client on the first
 * scrape of /metrics.
 *
 * The primary holds the listening socket rather than node:cluster, because of the drain: to end
 * without resetting any request, the process that accepts connections must stop accepting first
 * and then give every connection it accepted to a worker that is still serving. node:cluster keeps
 * accepting until the last worker has closed, then closes the connections it still holds (which
 * their clients see as resets). Here the primary stops accepting, then tells the workers to drain;
 * a connection it had accepted reaches its worker before that message (one ordered channel), and
 * is served like the others (http/draining.ts).
 */
export type WorkerMessage =
  | { type: 'rowi:waiting' }
  | { type: 'rowi:prepared' }
  | { type: 'rowi:ready' }
  | { type: 'rowi:failed'; message: string; config: boolean }
  | { type: 'rowi:origin'; origin: string }
  | { type: 'rowi:connection' }
  | { type: 'rowi:shutdown' };

export const isWorkerMessage = (message: unknown): message is WorkerMessage =>
  typeof message === 'object' &&
  message !== null &&
  typeof (message as { type?: unknown }).type === 'string' &&
  (message as { type: string }).type.startsWith('rowi:');

/** A worker that dies this soon after it started is not restarted (it would die again). */
const RESTART_MIN_UPTIME_MS = 2000;

/**
 * `rowi serve` with more than one worker, as the preparer's settings say. Returns -1 while it
 * serves; the preparer's exit code when the preparer ended the start (it said why); undefined
 * when the settings ask for one process after all (the caller serves alone: process/serve.ts).
 */
export async function serveWithWorkers(preparer = new Preparer()): Promise<number | undefined> {
  try {
    const { config, workers } = await preparer.configured();
    if (workers <= 1) return undefined;
    await serveAsPrimary(config, workers, preparer);
    return -1;
  } catch (error) {
    if (error instanceof PreparerEnded) return error.exitCode;
    throw error;
  }
}

async function serveAsPrimary(config: Config, count: number, preparer: Preparer): Promise<void> {
  const logger = createLogger(config);
  const damage = new WorkersDamage();
  preparer.onDamage(() => damage.foundElsewhere());
  // The workers start loading rowi while the preparer migrates; each opens the database only once it is prepared.
  const prepared = preparer.prepared();
  prepared.catch(() => {});
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
      // A preparer that ended the start rejects `prepared`: handled below, not here (once a worker
      // waits, an unhandled rejection here would end the start with exit code 1, not the preparer's).
      if (isWorkerMessage(message) && message.type === 'rowi:waiting')
        prepared.then(
          () => worker.isConnected() && worker.send({ type: 'rowi:prepared' } satisfies WorkerMessage),
          () => {},
        );
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
      preparer.kill();
      logger.flush(() => process.exit(0));
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
  const allReady = new Promise<void>((resolve, reject) => {
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
  });
  // Handled below, once the preparer is done; a worker may fail before.
  allReady.catch(() => {});
  try {
    await prepared;
  } catch (error) {
    // The preparer ended the start (it said why): no worker is left behind.
    shuttingDown = true;
    for (const worker of started.keys()) worker.process.kill('SIGKILL');
    throw error;
  }
  await allReady
    .then(async () => {
      listener = createServer({ pauseOnConnect: true }, deal);
      await new Promise<void>((resolve, reject) => {
        listener!.once('error', (error) => reject(listenRefusal(error, config.host, config.port)));
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
      preparer.kill();
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
    const { storage, firstAdmin } = await preparer.listening();
    const processes = `${count} worker processes`;
    announceListening(logger, origin!, storage, processes, firstAdmin);
  } catch (error) {
    // The start fails as a whole (the database refused the first admin): no worker is left serving.
    shuttingDown = true;
    for (const worker of started.keys()) worker.process.kill('SIGKILL');
    listener?.close();
    throw error;
  }
  // Scheduled backups are started here, once for all workers, each copied in a process of its own.
  if (config.backupDir !== '') {
    const { scheduleBackups } = await import('../db/backup-schedule.js');
    scheduleBackups(config, logger);
  }
  ready = true;
}
