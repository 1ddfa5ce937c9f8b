import { parentPort, workerData } from 'node:worker_threads';
import { openStorage } from '../db/connect.js';
import { shareWriteLockReleases } from '../db/sqlite-lock.js';
import { createLogger } from '../observability/logger.js';
import { runImport } from '../engine/imports/run.js';
import { IMPORTERS } from '../api/importers.js';
import type { FromImportThread, ImportThreadData, ToImportThread } from './import-thread.js';

/** PostgreSQL connections the thread keeps at most: an atomic import holds its transaction and writes its progress beside it. */
const THREAD_POOL_SIZE = 4;

// The import thread (import-thread.ts): imports run on a database connection of their own, as the
// main thread hands them over, until it is told to close. Its SQLite writes yield the write lock to
// the main thread's: a request's write waits for at most the chunk being written.
const { config, lockReleases } = workerData as ImportThreadData;
shareWriteLockReleases(lockReleases);
const log = createLogger(config).child({ thread: 'imports' });
const storage = await openStorage(
  { ...config, databasePoolSize: Math.min(config.databasePoolSize, THREAD_POOL_SIZE) },
  log,
  // The main thread checkpoints the file and hears the other instances' signals.
  { checkpoints: false, signals: false },
);
const targets = new Map(IMPORTERS.map((target) => [target.name, target]));
const tell = (message: FromImportThread) => parentPort!.postMessage(message);
/** A fault as a message can carry it: an Error is cloned (name, message, stack); anything else is said in words. */
const cloneable = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));
// The main thread's event feed wakes on the events the imports commit here (and tells other processes).
storage.db.commits.onEventsCommitted(() => tell('events'));
let stopping = false;
const running = new Set<Promise<void>>();
/** The main thread's answers to what the imports would spend of their callers' budgets, by request. */
const spending = new Map<number, (spent: { allowed: boolean; retryMs: number }) => void>();
let nextSpend = 0;

parentPort!.on('message', (message: ToImportThread) => {
  if (message === 'stop') stopping = true;
  else if (typeof message === 'object' && 'spent' in message) {
    const { request, ...spent } = message.spent;
    spending.get(request)?.(spent);
    spending.delete(request);
  } else if (message === 'close')
    void (async () => {
      stopping = true;
      await Promise.allSettled(running);
      await storage.close();
      log.flush();
      parentPort!.close();
    })();
  else {
    const { operation, access, file, budgetStep } = message.run;
    // The budget's counters are the main thread's: each spend is asked of it.
    const budget =
      budgetStep === undefined
        ? undefined
        : {
            step: budgetStep,
            take: (units: number) =>
              new Promise<{ allowed: boolean; retryMs: number }>((resolve) => {
                const request = nextSpend++;
                spending.set(request, resolve);
                tell({ spend: { operation: operation.id, request, units } });
              }),
          };
    const job = runImport({
      db: storage.db,
      log,
      target: targets.get(operation.target as never)!,
      operation,
      access,
      file,
      stopping: () => stopping,
      // No request waits for this event loop: a chunk's statements run one after another.
      turns: false,
      ...(budget === undefined ? {} : { budget }),
    }).then(
      () => tell({ ended: operation.id }),
      (error: unknown) => {
        try {
          tell({ failed: operation.id, error: cloneable(error) });
        } catch {
          tell({ failed: operation.id, error: new Error(cloneable(error).message) });
        }
      },
    );
    running.add(job);
    void job.finally(() => running.delete(job));
  }
});
