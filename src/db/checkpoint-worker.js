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

/** @type {{ file: string; synchronous: 'FULL' | 'NORMAL'; intervalMs: number; restartPages: number }} */
const { file, synchronous, intervalMs, restartPages } = workerData;
/**
 * How long a RESTART checkpoint may wait for the writer to end its transaction, and then for the
 * readers to leave the log: the writer waits for it meanwhile (it holds the write lock).
 */
const RESTART_WAIT_MS = 50;
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

/** @returns {Promise<{ checkpoint(): { busy: number; log: number; checkpointed: number }; close(): void }>} */
async function open() {
  const connection = await openPlainConnection(file, [`synchronous = ${synchronous}`, 'busy_timeout = 0']);
  const run = (/** @type {'PASSIVE' | 'RESTART'} */ mode) =>
    /** @type {{ busy: number; log: number; checkpointed: number }} */ (
      /** @type {unknown} */ (connection.all(`pragma wal_checkpoint(${mode})`)[0])
    );
  const checkpoint = () => {
    const passive = run('PASSIVE');
    // Under writes that never stop, a PASSIVE checkpoint never catches up with the log's end (each
    // commit adds to it meanwhile), and SQLite starts the log again from its beginning only when a
    // writer finds it all copied: the log would grow for as long as the writes go on (60 MB in
    // 4 s of commits in test/db/checkpoints.test.ts, 1.2-1.6 GB under the orders loads of
    // bench:backups). Once it is this long, a RESTART
    // copies the little the PASSIVE one left with the writer held back for a moment, so that the
    // next write starts the log again (journal_size_limit then truncates the file). A second
    // PASSIVE first copies what came during the first, so that little is left for the writer to wait on.
    if (passive.log < restartPages) return passive;
    run('PASSIVE');
    connection.exec(`pragma busy_timeout = ${RESTART_WAIT_MS}`);
    try {
      return run('RESTART');
    } finally {
      connection.exec('pragma busy_timeout = 0');
    }
  };
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
