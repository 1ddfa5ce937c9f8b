import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../version.js';
import { isDiskFull } from './driver-errors.js';

/**
 * Backups of the SQLite file, taken while rowi serves it: a consistent copy (SQLite's online
 * backup API under one read transaction, which reads one snapshot and lets writers go on; a few
 * MB at a time, paced, in a process at the lowest priority: backup-child.js), written under a
 * temporary name, checked (integrity, the migrations it has, the rows of each table), its SHA-256
 * recorded in a manifest beside it (`FILE.json`), and renamed into place only when whole. A
 * process killed during a backup leaves its temporary file (`FILE.partial-PID-…`), never a file
 * under the final name.
 */
export interface BackupManifest {
  file: string;
  bytes: number;
  sha256: string;
  /** When the copy's snapshot was taken (its start), ISO 8601. */
  taken_at: string;
  ms: number;
  /** The last migration the copy has: its schema version. */
  schema: string | null;
  rows: Record<string, number>;
  rowi: string;
}

/** A backup or a restore that cannot be done, said in words an operator can act on. */
export class BackupError extends Error {
  override name = 'BackupError';
  /** The disk was full: what a request would have been answered 507 insufficient-storage for. */
  readonly diskFull: boolean;
  constructor(message: string, options: { diskFull?: boolean } = {}) {
    super(message);
    this.diskFull = options.diskFull ?? false;
  }
}

interface Examined {
  integrity: string[];
  migrations: string[];
  rows: Record<string, number>;
  sha256: string;
  bytes: number;
}

/**
 * Runs backup-child.js in a process of its own, which lowers its CPU priority itself. A process
 * rather than a thread: its priority is inherited by every thread it starts, node:sqlite's thread
 * pool included, and nothing of it is left once it ends.
 */
function apart(job: { task: 'backup'; source: string; copy: string } | { task: 'check'; file: string }) {
  return new Promise<Examined>((resolvePromise, reject) => {
    const script = fileURLToPath(new URL('./backup-child.js', import.meta.url));
    // NODE_OPTIONS is the server's (an --inspect port, a preloaded agent): not the copy's.
    const { NODE_OPTIONS: _serversOwn, ...env } = process.env;
    const child = spawn(process.execPath, [script, JSON.stringify(job)], {
      env,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    // A server that stops does not wait for a backup under way: its copy ends with it (the next backup removes the file).
    const stop = () => child.kill('SIGKILL');
    process.once('exit', stop);
    let settled = false;
    child.once('message', (message: { ok?: Examined; error?: string; code?: string; errcode?: number }) => {
      settled = true;
      if (message.ok !== undefined) resolvePromise(message.ok);
      else
        reject(
          Object.assign(new BackupError(message.error ?? 'the backup process failed'), {
            code: message.code,
            errcode: message.errcode,
          }),
        );
    });
    child.once('error', (error) => {
      settled = true;
      reject(error);
    });
    child.once('exit', (code, signal) => {
      process.off('exit', stop);
      if (!settled)
        reject(new BackupError(`the backup process ended with exit code ${code}${signal ? ` (${signal})` : ''}`));
    });
  });
}

export const manifestOf = (file: string) => `${file}.json`;

/** What a manifest records, each member with the check its value must pass. */
const MANIFEST_MEMBERS: Record<keyof BackupManifest, (value: unknown) => boolean> = {
  file: (value) => typeof value === 'string' && value !== '',
  bytes: (value) => Number.isSafeInteger(value) && (value as number) >= 0,
  sha256: (value) => typeof value === 'string' && /^[0-9a-f]{64}$/.test(value),
  taken_at: (value) => typeof value === 'string' && !Number.isNaN(Date.parse(value)),
  ms: (value) => Number.isSafeInteger(value) && (value as number) >= 0,
  schema: (value) => value === null || typeof value === 'string',
  rows: (value) =>
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((count) => Number.isSafeInteger(count) && (count as number) >= 0),
  rowi: (value) => typeof value === 'string',
};

/**
 * The manifest beside a backup, read and checked: BackupError "manifest unreadable", naming it
 * (as `shown`: the path, or only its name where the folder is not the reader's business) and what
 * is wrong, when it cannot be read, is not JSON, or is not what rowi writes (null, a field missing
 * or of another type): a backup is never described, listed or restored from a manifest half read.
 */
export async function readManifest(file: string, shown = file): Promise<BackupManifest> {
  const unreadable = (why: string) => new BackupError(`manifest unreadable: ${shown} ${why}`);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw unreadable(`cannot be read (${describeFault(error)})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw unreadable('is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw unreadable(
      `holds ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}, not an object`,
    );
  const members = value as Record<string, unknown>;
  const names = Object.keys(MANIFEST_MEMBERS) as (keyof BackupManifest)[];
  const missing = names.filter((name) => !Object.hasOwn(members, name));
  if (missing.length > 0) throw unreadable(`lacks ${missing.join(', ')}`);
  const wrong = names.filter((name) => !MANIFEST_MEMBERS[name](members[name]));
  if (wrong.length > 0) throw unreadable(`has a wrong ${wrong.join(', ')}`);
  return value as BackupManifest;
}

/** Writes a small file whole or not at all: a temporary name, fsync, rename. */
async function writeWhole(file: string, text: string): Promise<void> {
  const temporary = `${file}.partial-${process.pid}-${randomBytes(4).toString('hex')}`;
  await writeFile(temporary, text, { flush: true });
  await rename(temporary, file);
}

async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, 'r');
  try {
    await handle.sync();
  } catch {
    // Some file systems cannot fsync a folder; the rename is still atomic.
  } finally {
    await handle.close();
  }
}

/**
 * Backs the SQLite file `source` up to `target` (a new file: an existing one is never replaced)
 * and writes its manifest beside it. Throws BackupError, having removed its temporary file, when
 * the copy cannot be made or is not sound.
 */
export async function backupSqlite(source: string, target: string): Promise<BackupManifest> {
  const targetPath = resolve(target);
  if (!existsSync(source)) throw new BackupError(`there is no database to back up at ${source}`);
  if (existsSync(targetPath)) throw new BackupError(`${targetPath} exists already: a backup never replaces a file`);
  await mkdir(dirname(targetPath), { recursive: true });
  await removeAbandoned(dirname(targetPath));
  const copy = `${targetPath}.partial-${process.pid}-${randomBytes(4).toString('hex')}`;
  const started = Date.now();
  try {
    const examined = await apart({ task: 'backup', source, copy });
    if (examined.integrity.join() !== 'ok')
      throw new BackupError(`the copy failed SQLite's integrity_check: ${examined.integrity.slice(0, 3).join('; ')}`);
    if (existsSync(targetPath)) throw new BackupError(`${targetPath} appeared while the backup was taken`);
    await rename(copy, targetPath);
    await syncFolder(dirname(targetPath));
    const manifest: BackupManifest = {
      file: basename(targetPath),
      bytes: examined.bytes,
      sha256: examined.sha256,
      taken_at: new Date(started).toISOString(),
      ms: Date.now() - started,
      schema: examined.migrations.at(-1) ?? null,
      rows: examined.rows,
      rowi: VERSION,
    };
    await writeWhole(manifestOf(targetPath), `${JSON.stringify(manifest, null, 2)}\n`);
    return manifest;
  } catch (error) {
    await rm(copy, { force: true });
    // SQLite's own words, "database or disk is full", would leave an operator wondering which.
    if (isDiskFull(error) || (error as { code?: string }).code === 'ENOSPC')
      throw new BackupError(`the disk is full where the backup is written (${dirname(targetPath)})`, {
        diskFull: true,
      });
    throw error instanceof BackupError ? error : new BackupError(describeFault(error));
  }
}

/** A file-system fault in words an operator can act on. */
export function describeFault(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'ENOSPC' || isDiskFull(error)) return 'the disk is full';
  if (code === 'ENOENT') return `a folder is gone (${message})`;
  if (code === 'ENOTDIR' || code === 'EEXIST') return `a file is where a folder should be (${message})`;
  return message ?? String(error);
}

/** What a file to restore holds, checked: sound, rowi's, no newer than `known` migrations, and its checksum when one is recorded. */
export async function checkBackup(
  file: string,
  known: readonly string[],
): Promise<Examined & { manifest?: BackupManifest }> {
  if (!existsSync(file)) throw new BackupError(`there is no file at ${file}`);
  let examined: Examined;
  try {
    examined = await apart({ task: 'check', file });
  } catch (error) {
    throw new BackupError(`${file} is not a sound SQLite database: ${(error as Error).message}`);
  }
  if (examined.integrity.join() !== 'ok')
    throw new BackupError(
      `${file} is not a sound SQLite database: SQLite's integrity_check found ${examined.integrity.slice(0, 3).join('; ')}`,
    );
  if (examined.migrations.length === 0)
    throw new BackupError(`${file} is a SQLite database, but not rowi's (it has no migrations)`);
  const unknown = examined.migrations.filter((name) => !known.includes(name));
  if (unknown.length > 0)
    throw new BackupError(
      `${file} was made by a newer rowi: it has migration ${unknown.join(', ')}, which rowi ${VERSION} does not know; restore it with that rowi or a later one`,
    );
  let manifest: BackupManifest | undefined;
  if (existsSync(manifestOf(file))) {
    try {
      manifest = await readManifest(manifestOf(file));
    } catch (error) {
      // Its checksum cannot be checked: the operator decides (a manifest removed, the file restored unchecked).
      throw new BackupError(
        `${(error as Error).message}; the backup's SHA-256 cannot be checked against it: repair or remove it to restore ${file}`,
      );
    }
    if (manifest.sha256 !== examined.sha256)
      throw new BackupError(
        `${file} does not match the SHA-256 its manifest records (${manifestOf(file)}): the file changed or is damaged`,
      );
  }
  return { ...examined, manifest };
}

/**
 * The backups of a folder, newest first, from their manifests (a file without one is not listed,
 * nor is one whose manifest is unreadable: `unreadable` is told of each, with why).
 */
export async function listBackups(
  folder: string,
  unreadable: (error: BackupError) => void = () => {},
): Promise<BackupManifest[]> {
  let names: string[];
  try {
    names = await readdir(folder);
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return [];
    throw error;
  }
  const manifests: BackupManifest[] = [];
  for (const name of names) {
    if (!name.endsWith('.sqlite.json') || !names.includes(name.slice(0, -'.json'.length))) continue;
    if (!existsSync(join(folder, name))) continue; // removed by another process meanwhile (a manifest is written whole)
    try {
      manifests.push(await readManifest(join(folder, name), name));
    } catch (error) {
      if (error instanceof BackupError) unreadable(error);
      else throw error;
    }
  }
  return manifests.sort((a, b) => b.taken_at.localeCompare(a.taken_at) || b.file.localeCompare(a.file));
}

/**
 * Whether a process has the SQLite file open: rowi serving it holds it open for as long as it
 * runs (in WAL mode every connection keeps a shared lock), so the exclusive lock is refused. The
 * file's write-ahead log is folded back into it on the way, so that the file alone is whole.
 */
async function takeOver(data: string): Promise<void> {
  const { openPlainConnection } = await import('./sqlite-plain.js');
  const connection = await openPlainConnection(data, ['busy_timeout = 0', 'locking_mode = exclusive']);
  try {
    connection.exec('begin exclusive; commit');
    connection.all('pragma wal_checkpoint(TRUNCATE)');
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (code.startsWith('SQLITE_BUSY') || /locked/.test((error as Error).message))
      throw new BackupError(
        `${data} is in use by another process (a running rowi serve?): stop it first; restore never replaces a database in use`,
      );
    throw error;
  } finally {
    connection.close();
  }
}

/**
 * Puts the backup `file` in place of the SQLite file `data`: checks the backup (checkBackup),
 * refuses while another process has `data` open, keeps the current database aside under
 * `DATA.before-restore-TIME` (it is never deleted), and copies the backup in whole (a temporary
 * name, fsync, rename). The caller then migrates it forward. Returns where the old one is kept.
 */
export async function restoreSqlite(
  file: string,
  data: string,
  known: readonly string[],
): Promise<{ aside: string | undefined; checked: Examined & { manifest?: BackupManifest } }> {
  const source = resolve(file);
  const target = resolve(data);
  if (source === target) throw new BackupError('the backup to restore is the database itself');
  const checked = await checkBackup(source, known);
  await mkdir(dirname(target), { recursive: true });
  let aside: string | undefined;
  if (existsSync(target)) {
    await takeOver(target);
    aside = `${target}.before-restore-${new Date()
      .toISOString()
      .replaceAll(':', '')
      .replace(/\.\d+Z$/, 'Z')}`;
    await rename(target, aside);
    for (const suffix of ['-wal', '-shm']) await rm(`${target}${suffix}`, { force: true });
  }
  const copy = `${target}.restoring-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await copyFile(source, copy);
    const handle = await open(copy, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(copy, target);
    await syncFolder(dirname(target));
  } catch (error) {
    await rm(copy, { force: true });
    if (aside !== undefined && !existsSync(target)) await rename(aside, target);
    throw new BackupError(`the backup could not be put in place (${describeFault(error)}); the database is as it was`);
  }
  return { aside, checked };
}

/** Temporary files that backups killed on the way left in a folder (their process is gone). */
async function removeAbandoned(folder: string): Promise<void> {
  for (const name of await readdir(folder)) {
    const pid = Number(/\.partial-(\d+)-[0-9a-f]+(-journal|-wal|-shm)?$/.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || alive(pid)) continue;
    await rm(join(folder, name), { force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM';
  }
}
