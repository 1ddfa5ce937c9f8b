import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import { walPending } from './wal-state.js';

/**
 * WAL checkpoints off the thread that answers requests (checkpoint-worker.js says why). The
 * thread holds no reference to keep the process alive, and is started again if it ever dies.
 */
export interface Checkpoints {
  close(): Promise<void>;
}

/** How often the log is copied back into the database file. */
const CHECKPOINT_INTERVAL_MS = 1000;
/** A log this long (pages of 4 KB: 64 MB) is started again from its beginning (checkpoint-worker.js). */
const RESTART_PAGES = 16_384;
/**
 * A thread started by writes is started once the log holds this many pages not yet copied back
 * (SQLite's own wal_autocheckpoint default)… The few pages an idle process writes (a lease renewed
 * every ten seconds) wait in the log for more, or for the process to stop.
 */
const START_FRAMES = 1000;
/** …and ends once all was copied back and fewer than QUIET_FRAMES were written for IDLE_MS. */
const QUIET_FRAMES = 100;
const IDLE_MS = 30_000;

interface CheckpointOptions {
  restartPages?: number;
  /**
   * Start the thread only once the log needs a checkpoint (looked at every interval), and end it
   * once writes have stopped: an idle process holds no thread (each is an isolate of its own,
   * 10–18 MB). Without it the thread runs until closed.
   */
  whenWritten?: boolean;
}

export function startCheckpoints(
  file: string,
  synchronous: 'FULL' | 'NORMAL',
  log: FastifyBaseLogger | undefined,
  { restartPages = RESTART_PAGES, whenWritten = false }: CheckpointOptions = {},
): Checkpoints {
  let closing = false;
  let worker: Worker | undefined;
  let exited: Promise<void> = Promise.resolve();
  const start = () => {
    const thread = new Worker(new URL('./checkpoint-worker.js', import.meta.url), {
      workerData: {
        file,
        synchronous,
        intervalMs: CHECKPOINT_INTERVAL_MS,
        restartPages,
        ...(whenWritten ? { idleMs: IDLE_MS, idleFrames: QUIET_FRAMES } : {}),
      },
    });
    worker = thread;
    thread.unref();
    thread.on('message', (message: { checkpointed?: Record<string, number>; error?: string }) => {
      if (message.error !== undefined)
        log?.warn({ file, error: message.error }, 'a WAL checkpoint failed; the next one tries again');
      else log?.debug({ file, ...message.checkpointed }, 'WAL checkpoint');
    });
    thread.on('error', (error) => log?.error({ err: error, file }, 'the WAL checkpoint thread failed'));
    exited = new Promise((resolve) => {
      thread.once('exit', () => {
        resolve();
        worker = undefined;
        // A thread started by writes is started again by the log's need.
        if (!closing && !whenWritten) setTimeout(start, CHECKPOINT_INTERVAL_MS).unref();
      });
    });
  };
  const watch = whenWritten
    ? setInterval(() => {
        if (worker === undefined && walPending(file) >= START_FRAMES) start();
      }, CHECKPOINT_INTERVAL_MS).unref()
    : undefined;
  if (!whenWritten) start();
  return {
    async close() {
      if (!closing) {
        closing = true;
        clearInterval(watch);
        // A last checkpoint, so a process that stops leaves a short log behind.
        if (worker === undefined && walPending(file) > 0) start();
        worker?.ref();
        worker?.postMessage({ close: true });
      }
      await exited;
    },
  };
}
