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
 * connection with node:sqlite where Node has it, else better-sqlite3, as sqlite-connection.ts does.
 *
 * Messages in: { close: true }. Messages out: { checkpointed: { log, checkpointed, busy, ms } }
 * after each checkpoint that moved pages, { error } when one fails.
 */
import { parentPort, workerData } from 'node:worker_threads';

/** @type {{ file: string; synchronous: 'FULL' | 'NORMAL'; intervalMs: number }} */
const { file, synchronous, intervalMs } = workerData;
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

/** @returns {Promise<{ checkpoint(): { busy: number; log: number; checkpointed: number }; close(): void }>} */
async function open() {
  const pragmas = [`synchronous = ${synchronous}`, 'busy_timeout = 0'];
  try {
    // A string the type checker does not resolve: node:sqlite's types are not in @types/node 20.
    const { DatabaseSync } = /** @type {any} */ (await import(/** @type {string} */ ('node:sqlite')));
    const database = new DatabaseSync(file);
    for (const pragma of pragmas) database.exec(`pragma ${pragma}`);
    const statement = database.prepare('pragma wal_checkpoint(PASSIVE)');
    return { checkpoint: () => statement.get(), close: () => database.close() };
  } catch (error) {
    if (/** @type {{ code?: string }} */ (error).code !== 'ERR_UNKNOWN_BUILTIN_MODULE') throw error;
  }
  const { default: Database } = await import('better-sqlite3');
  const database = new Database(file, { fileMustExist: true });
  for (const pragma of pragmas) database.pragma(pragma);
  const statement = database.prepare('pragma wal_checkpoint(PASSIVE)');
  return { checkpoint: () => /** @type {any} */ (statement.get()), close: () => void database.close() };
}

const connection = await open();
const timer = setInterval(() => {
  const started = performance.now();
  try {
    const { busy, log, checkpointed } = connection.checkpoint();
    if (checkpointed > 0) port.postMessage({ checkpointed: { log, checkpointed, busy, ms: Math.round((performance.now() - started) * 10) / 10 } });
  } catch (error) {
    port.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
}, intervalMs);

port.on('message', (/** @type {{ close: true }} */ message) => {
  if (!('close' in message)) return;
  clearInterval(timer);
  // A last one, so a process that stops leaves a short log behind.
  try {
    connection.checkpoint();
  } finally {
    connection.close();
    port.close();
  }
});
