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
 * Given `idleMs` and `idleFrames`, it ends by itself once, for `idleMs`, fewer frames than that have
 * been written to the log and all was copied back; checkpoints.ts starts it again once the log needs it.
 *
 * Messages in: { close: true }. Messages out: { checkpointed: { log, checkpointed, busy, ms } }
 * after each checkpoint that moved pages, { error } when one fails.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openPlainConnection } from './sqlite-plain.js';

/** @type {{ file: string; synchronous: 'FULL' | 'NORMAL'; intervalMs: number; restartPages: number; idleMs?: number; idleFrames?: number }} */
const { file, synchronous, intervalMs, restartPages, idleMs, idleFrames = 0 } = workerData;
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
let closed = false;
/** The log's length at the last checkpoint; the frames written since `quietSince`, a moment when all was copied back. */
let lastLog = 0;
let written = 0;
let quietSince = performance.now();
const timer = setInterval(() => {
  const started = performance.now();
  try {
    const { busy, log, checkpointed } = connection.checkpoint();
    if (checkpointed > 0)
      port.postMessage({
        checkpointed: { log, checkpointed, busy, ms: Math.round((performance.now() - started) * 10) / 10 },
      });
    if (idleMs === undefined) return;
    // A log started again from its beginning holds only frames written since.
    written += log >= lastLog ? log - lastLog : log;
    lastLog = log;
    if (checkpointed < log || written >= idleFrames) {
      written = 0;
      quietSince = started;
    } else if (started - quietSince >= idleMs) end();
  } catch (error) {
    port.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
}, intervalMs);

function end() {
  closed = true;
  clearInterval(timer);
  connection.close();
  port.close();
}

port.on('message', (/** @type {{ close: true }} */ message) => {
  // A second close (asked for again while the first was on its way, or after the thread ended by itself) finds nothing left to do.
  if (!('close' in message) || closed) return;
  // A last one, so a process that stops leaves a short log behind.
  try {
    connection.checkpoint();
  } finally {
    end();
  }
});
