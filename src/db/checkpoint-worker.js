// @ts-check
/**
 * WAL checkpoints of a SQLite file, on a thread of its own (started by startCheckpoints in
 * checkpoints.ts). A checkpoint copies the pages the write-ahead log holds back into the database
 * file and waits for that file to reach the disk: tens to hundreds of milliseconds under load.
 * SQLite runs one by itself inside a COMMIT every 1,000 pages of log, on the thread that commits:
 * the thread that answers requests. The writer has that turned off (wal_autocheckpoint = 0); this
 * thread, with its own connection, checkpoints every `intervalMs` instead, PASSIVE: it copies what
 * it can without waiting for or holding up any writer or reader.
 *
 * Plain JavaScript, type-checked by TypeScript through JSDoc: a worker thread runs a file as Node
 * finds it, from dist/ and under the test runner (which loads src/) alike. It opens its
 * connection with node:sqlite where Node has it, else better-sqlite3 (sqlite-plain.js).
 *
 * Messages in: { close: true }. Messages out: { checkpointed: { log, checkpointed, busy, ms } }
 * after each checkpoint that moved pages, { error } when one fails.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openPlainConnection } from './sqlite-plain.js';

/** @type {{ file: string; synchronous: 'FULL' | 'NORMAL'; intervalMs: number }} */
const { file, synchronous, intervalMs } = workerData;
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

/** @returns {Promise<{ checkpoint(): { busy: number; log: number; checkpointed: number }; close(): void }>} */
async function open() {
  const connection = await openPlainConnection(file, [`synchronous = ${synchronous}`, 'busy_timeout = 0']);
  const checkpoint = () =>
    /** @type {{ busy: number; log: number; checkpointed: number }} */ (
      /** @type {unknown} */ (connection.all('pragma wal_checkpoint(PASSIVE)')[0])
    );
  return { checkpoint, close: connection.close };
}

const connection = await open();
const timer = setInterval(() => {
  const started = performance.now();
  try {
    const { busy, log, checkpointed } = connection.checkpoint();
    if (checkpointed > 0)
      port.postMessage({
        checkpointed: { log, checkpointed, busy, ms: Math.round((performance.now() - started) * 10) / 10 },
      });
  } catch (error) {
    port.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
}, intervalMs);

let closed = false;
port.on('message', (/** @type {{ close: true }} */ message) => {
  // A second close (asked for again while the first was on its way) finds nothing left to do.
  if (!('close' in message) || closed) return;
  closed = true;
  clearInterval(timer);
  // A last one, so a process that stops leaves a short log behind.
  try {
    connection.checkpoint();
  } finally {
    connection.close();
    port.close();
  }
});
