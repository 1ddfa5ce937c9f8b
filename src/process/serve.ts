import closeWithGrace from 'close-with-grace';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { serveAsPrimary, serveAsWorker } from './cluster.js';
import type { Config } from '../config/config.js';
import { announce, CLOSING_MARGIN_MS, listen, migrate, openCheckedStorage } from './startup.js';
import { createLogger } from '../observability/logger.js';
import { checkBackupSettings, scheduleBackups } from '../db/backup-schedule.js';

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
  checkBackupSettings(config);
  const workers = config.workers === 0 ? availableParallelism() : config.workers;
  if (workers <= 1) return serveAlone(config);
  return serveAsPrimary(config, workers);
}

async function serveAlone(config: Config): Promise<void> {
  const logger = createLogger(config);
  const storage = await openCheckedStorage(config, logger);
  await migrate(storage, logger);
  const backups = scheduleBackups(config, logger);
  const { app, origin } = await listen(config, storage, logger);
  // Only once rowi is listening, so that a start that fails (a bad certificate, a port in use)
  // cannot create the first admin and lose its key.
  try {
    await announce(config, storage, logger, origin, 'one process');
  } catch (error) {
    await app.close();
    await storage.close();
    throw error;
  }
  closeWithGrace(
    {
      delay: config.shutdownTimeout + CLOSING_MARGIN_MS,
      logger: { error: (message: unknown) => logger.error(message) },
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error, shutting down');
      else logger.info({ signal }, 'shutting down: finishing in-flight requests');
      await app.close();
      await backups?.close();
      await storage.close();
      logger.info('stopped');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      // The drain cut requests at the shutdown time-out: exit 1, as the time-out's own would.
      if (app.drainedCleanly === false) throw new Error('requests were cut off at the shutdown time-out');
    },
  );
}
