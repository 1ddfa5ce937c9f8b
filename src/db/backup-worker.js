// @ts-check
/**
 * The slow part of a backup of the SQLite file, on a thread of its own (started by backup.ts), so
 * that a server taking one goes on answering requests: copying the database (`VACUUM INTO`, which
 * reads one consistent snapshot and lets writers go on, as any reader in WAL mode does), checking
 * the copy (`PRAGMA integrity_check`, the migrations it has, the rows of each table), its SHA-256,
 * and an fsync, so that the copy is on the disk before backup.ts renames it into place.
 * `check` does the same checks on a file already there (`rowi restore`).
 *
 * Plain JavaScript, type-checked through JSDoc, for the reason checkpoint-worker.js gives.
 * Message out: { ok: Examined } or { error, code }.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readSync, statSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { openPlainConnection } from './sqlite-plain.js';

/** @type {{ task: 'backup'; source: string; copy: string } | { task: 'check'; file: string }} */
const job = workerData;
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

/** @param {string} text */
const quoted = (text) => `'${text.replaceAll("'", "''")}'`;

/**
 * @param {string} file
 * @returns {Promise<{ integrity: string[]; migrations: string[]; rows: Record<string, number> }>}
 */
async function examine(file) {
  const connection = await openPlainConnection(file, ['busy_timeout = 10000']);
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

try {
  const file = job.task === 'backup' ? job.copy : job.file;
  if (job.task === 'backup') {
    const source = await openPlainConnection(job.source, ['busy_timeout = 10000']);
    try {
      source.exec(`vacuum into ${quoted(job.copy)}`);
    } finally {
      source.close();
    }
  }
  const examined = await examine(file);
  port.postMessage({ ok: { ...examined, sha256: digest(file, job.task === 'backup'), bytes: statSync(file).size } });
} catch (error) {
  const failure = /** @type {Error & { code?: string; errcode?: number }} */ (error);
  port.postMessage({ error: failure.message, code: failure.code });
}
