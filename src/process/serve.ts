import closeWithGrace from 'close-with-grace';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { serveAsWorker } from './cluster-worker.js';
import type { Config } from '../config/config.js';
import { announce, CLOSING_MARGIN_MS, createFirstAdmin, listen, migrate, openCheckedStorage } from './startup.js';
import { createLogger } from '../observability/logger.js';
import { checkBackupSettings, scheduleBackups } from '../db/backup-schedule.js';
import { isPreparerMessage, PREPARER_ENV, type PreparerMessage } from './preparer.js';
import { tuneHeap } from './heap.js';
import { checkWritableFolders } from './folders.js';

/**
 * `rowi serve`: open and migrate the database, build the app, listen, and shut down gracefully
 * on SIGTERM/SIGINT — stop accepting, let in-flight requests finish within the shutdown timeout,
 * close the database, exit 0 (1 if the timeout had to cut requests off).
 *
 * With ROWI_WORKERS / --workers N above 1 (0, the default, means one per core), the process
 * becomes the primary of N worker processes that share the port (node:cluster: the primary
 * accepts connections and hands them out). Its preparer migrates the database before the workers
 * open it and creates the first admin once every worker listens; each worker is a whole rowi with
 * its own pool; a worker that dies is replaced; SIGTERM/SIGINT to the primary drains every worker.
 * The primary starts lean (process/cli.ts); this is the way when that did not apply.
 */
export async function serve(config: Config): Promise<void> {
  tuneHeap(config);
  if (cluster.isWorker) return serveAsWorker(config);
  checkBackupSettings(config);
  // With --workers, in the preparer, whose exit code the primary takes as its own.
  await checkWritableFolders(config);
  const workers = config.workers === 0 ? availableParallelism() : config.workers;
  if (process.env[PREPARER_ENV] !== undefined) return prepareForPrimary(config, workers);
  if (workers <= 1) return serveAlone(config);
  const { serveWithWorkers } = await import('./cluster.js');
  const code = await serveWithWorkers();
  if (code === undefined) return serveAlone(config);
  if (code >= 0) process.exitCode = code;
}

/**
 * The preparer of a primary (process/preparer.ts): the settings, checked, go to the primary; then
 * the database, opened, checked and migrated; once the primary listens, the first admin (the
 * primary writes the banner once this process has ended). What fails here is said and ends this process with its exit code, which the primary
 * takes as its own.
 */
async function prepareForPrimary(config: Config, workers: number): Promise<void> {
  delete process.env[PREPARER_ENV];
  // The primary gone (killed), there is no one to prepare for.
  const orphaned = () => process.exit(1);
  process.once('disconnect', orphaned);
  const tell = (message: PreparerMessage) =>
    new Promise<void>((resolve, reject) =>
      process.send!(message, (error: Error | null) => (error ? reject(error) : resolve())),
    );
  try {
    await tell({ type: 'rowi:configured', config, workers });
    if (workers <= 1) return;
    const logger = createLogger(config);
    let checkEnds: Promise<void> | undefined;
    const storage = await openCheckedStorage(
      config,
      logger,
      (detail, checked) => {
        checked.corruption.report(detail);
        void tell({ type: 'rowi:damage', detail }).catch(() => {});
      },
      (ends) => (checkEnds = ends),
    );
    try {
      await migrate(storage, logger);
    } catch (error) {
      await storage.close();
      throw error;
    }
    const listening = new Promise<void>((resolve) => {
      const listener = (message: unknown) => {
        if (!isPreparerMessage(message) || message.type !== 'rowi:listening') return;
        process.off('message', listener);
        resolve();
      };
      process.on('message', listener);
    });
    await tell({ type: 'rowi:prepared' });
    await listening;
    let firstAdmin;
    try {
      firstAdmin = await createFirstAdmin(storage);
    } finally {
      // The workers have their own connections; this one would only count against the server's limit.
      await storage.close();
    }
    await tell({
      type: 'rowi:first-admin',
      storage: storage.describe,
      firstAdmin,
      checkGoesOn: checkEnds !== undefined,
    });
    // A check still running keeps this process (its channel to the primary) until it ends.
    process.channel?.ref();
    await checkEnds;
  } finally {
    // Listening for it keeps this process; a start that failed here ends with its exit code.
    process.off('disconnect', orphaned);
  }
  process.disconnect();
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
    await announce(storage, logger, origin, 'one process');
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
