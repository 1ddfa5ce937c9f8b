// @ts-check
/**
 * The audit trail's writer for an SQLite file, on a thread of its own (started by
 * SqliteWorkerAuditWriter in audit.ts). better-sqlite3 is synchronous: written on the main
 * thread, every batch (and its fsync under synchronous=FULL) would stop all requests for
 * milliseconds. Here the batch is written on this thread's own connection to the same file,
 * and the main thread only hands over the values.
 *
 * Plain JavaScript, type-checked by TypeScript through JSDoc: a worker thread runs a file as
 * Node finds it, both from dist/ and under the test runner, which loads src/ itself.
 *
 * Messages in: { id, values } (the rows' values in the order of `columns`, `at` in epoch
 * milliseconds) and { close: true }. Messages out: { id } when the rows are committed, or
 * { id, error } when they are not (the main thread keeps them for the next attempt).
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ file: string; synchronous: 'FULL' | 'NORMAL'; columns: readonly string[]; rowsPerInsert: number }} */
const { file, synchronous, columns, rowsPerInsert } = workerData;
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

const db = new Database(file, { fileMustExist: true });
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${synchronous}`);
db.pragma('busy_timeout = 5000');

const width = columns.length;
const AT = columns.indexOf('at');
const rowPlaceholders = `(${columns.map(() => '?').join(', ')})`;
/** @type {Map<number, import('better-sqlite3').Statement>} */
const inserts = new Map();

/** INSERT of `rows` rows (a power of two up to rowsPerInsert), prepared once. */
function insertOf(/** @type {number} */ rows) {
  let statement = inserts.get(rows);
  if (statement === undefined) {
    const sql = `insert into "audit_events" (${columns.map((column) => `"${column}"`).join(', ')}) values ${Array(rows).fill(rowPlaceholders).join(', ')}`;
    statement = db.prepare(sql);
    inserts.set(rows, statement);
  }
  return statement;
}

const writeAll = db.transaction((/** @type {unknown[]} */ values) => {
  for (let at = AT; at < values.length; at += width) values[at] = new Date(/** @type {number} */ (values[at])).toISOString();
  const rows = values.length / width;
  let start = 0;
  while (start < rows) {
    const size = Math.min(rowsPerInsert, 2 ** Math.floor(Math.log2(rows - start)));
    insertOf(size).run(values.slice(start * width, (start + size) * width));
    start += size;
  }
});

port.on('message', (/** @type {{ id: number; values: unknown[] } | { close: true }} */ message) => {
  if ('close' in message) {
    db.close();
    port.close();
    return;
  }
  try {
    writeAll(message.values);
    port.postMessage({ id: message.id });
  } catch (error) {
    port.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
  }
});
