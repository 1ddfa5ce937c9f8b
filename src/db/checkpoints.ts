import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';

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

export function startCheckpoints(
  file: string,
  synchronous: 'FULL' | 'NORMAL',
  log: FastifyBaseLogger | undefined,
  { restartPages = RESTART_PAGES }: { restartPages?: number } = {},
): Checkpoints {
  let closing = false;
  let worker: Worker;
  let exited: Promise<void>;
  const start = () => {
    worker = new Worker(new URL('./checkpoint-worker.js', import.meta.url), {
      workerData: { file, synchronous, intervalMs: CHECKPOINT_INTERVAL_MS, restartPages },
    });
    worker.unref();
    worker.on('message', (message: { checkpointed?: Record<string, number>; error?: string }) => {
      if (message.error !== undefined)
        log?.warn({ file, error: message.error }, 'a WAL checkpoint failed; the next one tries again');
      else log?.debug({ file, ...message.checkpointed }, 'WAL checkpoint');
    });
    worker.on('error', (error) => log?.error({ err: error, file }, 'the WAL checkpoint thread failed'));
    exited = new Promise((resolve) => {
      worker.once('exit', () => {
        resolve();
        if (!closing) setTimeout(start, CHECKPOINT_INTERVAL_MS).unref();
      });
    });
  };
  start();
  return {
    async close() {
      if (!closing) {
        closing = true;
        worker.ref();
        worker.postMessage({ close: true });
      }
      await exited;
    },
  };
}
