// @ts-check
/**
 * The slow part of a backup of the SQLite file, in a process of its own (started by backup.ts), so
 * that a server taking one goes on answering requests: copying the database, checking the copy
 * (`PRAGMA integrity_check`, the migrations it has, the rows of each table), its SHA-256, and an
 * fsync, so that the copy is on the disk before backup.ts renames it into place.
 * `check` does the same checks on a file already there (`rowi restore`).
 *
 * A backup must not stall the requests it runs beside (docs/backups.md):
 * every thread of the process runs at the lowest CPU priority (nice 19): Node 24's node:sqlite
 * copies each step on libuv's thread pool, which a thread's nice value (a worker thread's, as
 * before) did not reach. The copy goes 4 MB at a time, each step's pages flushed to the disk before
 * the next (so that the server's own fsyncs never wait behind a gigabyte of writeback), followed
 * by a pause twice as long as the step took.
 *
 * Plain JavaScript, type-checked through JSDoc, for the reason checkpoint-worker.js gives.
 * Argument: JSON { task: 'backup', source, copy } or { task: 'check', file }.
 * Message out, once: { ok: Examined } or { error, code, errcode } (node:sqlite's SQLite result code).
 */
import { createHash } from 'node:crypto';
import { closeSync, fdatasyncSync, fsyncSync, openSync, readdirSync, readSync, rmSync, statSync } from 'node:fs';
import { setPriority } from 'node:os';
import { openPlainConnection } from './sqlite-plain.js';

/** @type {{ task: 'backup'; source: string; copy: string } | { task: 'check'; file: string }} */
const job = JSON.parse(process.argv[2] ?? '{}');
/** The process that asked for this one: when it is gone (killed), nobody waits for the copy. */
const parent = process.ppid;
let answered = false;
/** @param {{ ok: unknown } | { error: string; code?: string; errcode?: number }} message */
const answer = (message) => {
  answered = true;
  process.send?.(message, () => process.disconnect());
};

/** @param {string} text */
const quoted = (text) => `'${text.replaceAll("'", "''")}'`;

/**
 * Bytes a step of the copy moves before it is flushed to the disk and the copy pauses: at most
 * this much of the copy waits to be written when a commit of the server's asks for its fsync.
 */
const STEP_BYTES = 4 << 20;
/** The longest pause between two steps, however long a step took. */
const MOST_PAUSE_MS = 200;

/** @param {number} ms */
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Copies `source` into the new file `copy`: one consistent snapshot, while other connections write.
 * SQLite's online backup API copies pages, a step at a time; it restarts a backup whose source
 * changed between two steps, which under a steady stream of writes would never end, unless the
 * source connection holds one read transaction from the first step to the last: in WAL mode that
 * transaction's snapshot is what every step reads, and writers go on beside it. On a Node whose
 * node:sqlite has no backup API (22.13–22.15), `VACUUM INTO` (one statement, unpaced).
 * @param {string} source
 * @param {string} copy
 */
async function copyDatabase(source, copy) {
  const connection = await openPlainConnection(source, ['busy_timeout = 10000']);
  try {
    if (connection.backup === undefined) {
      connection.exec(`vacuum into ${quoted(copy)}`);
      return;
    }
    const pageSize = Number(connection.all('pragma page_size')[0]?.page_size ?? 4096);
    connection.exec('begin');
    let descriptor;
    try {
      // The read transaction starts with its first read: from here on, every step sees this snapshot.
      connection.all('select count(*) as n from sqlite_master');
      let stepStarted = performance.now();
      await connection.backup(copy, Math.max(1, Math.floor(STEP_BYTES / pageSize)), () => {
        if (process.ppid !== parent) abandon();
        descriptor ??= openSync(copy, 'r');
        fdatasyncSync(descriptor);
        sleep(Math.min(MOST_PAUSE_MS, 2 * (performance.now() - stepStarted)));
        stepStarted = performance.now();
      });
    } finally {
      if (descriptor !== undefined) closeSync(descriptor);
      connection.exec('commit');
    }
  } finally {
    connection.close();
  }
}

/** With the process that asked for it gone (killed), the copy is of no use: its files are removed and this process ends. */
function abandon() {
  if (job.task === 'backup') for (const suffix of ['', '-journal']) rmSync(`${job.copy}${suffix}`, { force: true });
  process.exit(1);
}

/**
 * @param {string} file
 * @param {string[]} pragmas
 * @returns {Promise<{ integrity: string[]; migrations: string[]; rows: Record<string, number> }>}
 */
async function examine(file, pragmas) {
  const connection = await openPlainConnection(file, ['busy_timeout = 10000', ...pragmas]);
  try {
    const integrity = connection.all('pragma integrity_check').map((row) => String(Object.values(row)[0]));
    const tables = connection
      .all(
        "select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\' order by name",
      )
      .map((row) => String(row.name));
    const migrations = tables.includes('kysely_migration')
      ? connection.all('select name from kysely_migration order by name').map((row) => String(row.name))
      : [];
    /** @type {Record<string, number>} */
    const rows = {};
    for (const table of tables)
      rows[table] = Number(connection.all(`select count(*) as n from "${table.replaceAll('"', '""')}"`)[0]?.n ?? 0);
    return { integrity, migrations, rows };
  } finally {
    connection.close();
  }
}

/**
 * The file's SHA-256, read in chunks; with `sync`, it is on the disk first.
 * @param {string} file
 * @param {boolean} sync
 */
function digest(file, sync) {
  const hash = createHash('sha256');
  const descriptor = openSync(file, 'r');
  try {
    if (sync) fsyncSync(descriptor);
    const chunk = Buffer.allocUnsafe(1 << 20);
    for (let read; (read = readSync(descriptor, chunk, 0, chunk.length, null)) > 0;)
      hash.update(chunk.subarray(0, read));
  } finally {
    closeSync(descriptor);
  }
  return hash.digest('hex');
}

/**
 * The lowest CPU priority for every thread of this process: on Linux a nice value is a thread's
 * own, so each thread there now is lowered, and the threads started later (libuv's pool, where
 * node:sqlite copies) inherit it from the thread that starts them.
 */
function lowerPriority() {
  try {
    setPriority(19);
    if (process.platform === 'linux')
      for (const thread of readdirSync('/proc/self/task')) setPriority(Number(thread), 19);
  } catch {
    // A platform that refuses it, or a thread that ended meanwhile: the rest runs as it is.
  }
}

process.on('disconnect', () => {
  if (!answered) abandon();
});

lowerPriority();
try {
  const file = job.task === 'backup' ? job.copy : job.file;
  if (job.task === 'backup') await copyDatabase(job.source, job.copy);
  // A page copy of a database in WAL mode says so in its header: the backup is made a single
  // file, in rollback mode, as `VACUUM INTO` makes it (a file to restore is only read).
  const examined = await examine(file, job.task === 'backup' ? ['journal_mode = delete'] : []);
  answer({ ok: { ...examined, sha256: digest(file, job.task === 'backup'), bytes: statSync(file).size } });
} catch (error) {
  const failure = /** @type {Error & { code?: string; errcode?: number }} */ (error);
  answer({ error: failure.message, code: failure.code, errcode: failure.errcode });
}
