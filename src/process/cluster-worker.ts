import closeWithGrace from 'close-with-grace';
import cluster from 'node:cluster';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { ConfigError, type Config } from '../config/config.js';
import { openStorage, type Storage } from '../db/connect.js';
import { CLOSING_MARGIN_MS, serveHandedConnections, setOrigin } from './startup.js';
import { createLogger } from '../observability/logger.js';
import { workerMetrics } from './cluster-metrics.js';
import { isWorkerMessage, type WorkerMessage } from './cluster.js';

/** A worker of `rowi serve --workers N` (process/cluster.ts): a whole rowi serving the connections its primary deals it. */
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
    // The app's modules load while the primary's preparer may still be migrating the database.
    const loading = import('../app.js');
    loading.catch(() => {});
    await primaryPrepared(logger);
    storage = await openStorage(config, logger);
    app = await serveHandedConnections(config, storage, logger, await workerMetrics());
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

/**
 * Once the primary's preparer has migrated the database (the primary answers at once when it has).
 * A primary that is gone meanwhile (killed) will never answer: the worker exits rather than wait.
 */
function primaryPrepared(logger: Pick<FastifyBaseLogger, 'warn'>): Promise<void> {
  return new Promise((resolve) => {
    const gone = () => {
      logger.warn('lost the primary process before the database was prepared; exiting');
      process.exit(1);
    };
    const listener = (message: unknown) => {
      if (!isWorkerMessage(message) || message.type !== 'rowi:prepared') return;
      process.off('message', listener);
      process.off('disconnect', gone);
      resolve();
    };
    process.on('message', listener);
    process.once('disconnect', gone);
    process.send!({ type: 'rowi:waiting' } satisfies WorkerMessage);
  });
}
