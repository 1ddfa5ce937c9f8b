import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { BackupError, backupSqlite, describeFault, listBackups, manifestOf, type BackupManifest } from './backup.js';
import { lockBackupFolder } from './backup-lock.js';

/**
 * Scheduled backups of the SQLite file into a folder: one every interval, the newest `keep`
 * kept. The outcome of the last attempts is written to `status.json` in that folder, where the
 * metrics of every process (and of every instance on the file) read it: one schedule per
 * database, whatever process takes the backups. A failed backup (a full disk, a folder that cannot be made) is
 * one log line and a count in that status, never a crash and never a change to the database.
 */
export interface BackupStatus {
  last_success_at: string | null;
  last_failure_at: string | null;
  failures: number;
  last_error: string | null;
}

export const STATUS_FILE = 'status.json';

/** The folder's status.json; undefined when there is none, or it is not a JSON object (then the next outcome rewrites it). */
export async function readBackupStatus(folder: string): Promise<BackupStatus | undefined> {
  try {
    const status: unknown = JSON.parse(await readFile(join(folder, STATUS_FILE), 'utf8'));
    return typeof status === 'object' && status !== null && !Array.isArray(status)
      ? (status as BackupStatus)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A name that sorts by time, to the millisecond: rowi-20261126T203000.123Z.sqlite. */
export const scheduledName = (at: Date) => `rowi-${at.toISOString().replaceAll(/[-:]/g, '')}.sqlite`;

export interface BackupSchedule {
  /** Takes one now, as the schedule does (the timer goes on). */
  runOnce(): Promise<BackupManifest | undefined>;
  close(): Promise<void>;
}

/**
 * A failure the folder cannot record, counted in this process's metrics instead; loaded only then,
 * so that the primary of --workers, which runs the schedule, does not load the metrics for it.
 */
async function countUnrecorded(): Promise<void> {
  const { countUnrecordedBackupFailure } = await import('../observability/metrics.js');
  countUnrecordedBackupFailure();
}

/** Records the outcome of a backup in the folder's status.json, where every process's metrics read it. */
async function recordOutcome(folder: string, change: Partial<BackupStatus>): Promise<void> {
  const status: BackupStatus = {
    last_success_at: null,
    last_failure_at: null,
    failures: 0,
    last_error: null,
    ...(await readBackupStatus(folder)),
    ...change,
  };
  await mkdir(folder, { recursive: true });
  const temporary = join(folder, `${STATUS_FILE}.partial-${process.pid}`);
  await writeFile(temporary, `${JSON.stringify(status, null, 2)}\n`);
  await rename(temporary, join(folder, STATUS_FILE));
}

/** What a backup is of (the database file `data`), where it goes, and how many are kept there. */
export interface BackupPlace {
  data: string;
  folder: string;
  keep: number;
}

/**
 * Takes one backup of `data` into `folder`, as the schedule does and as a backup started over
 * HTTP does: under the folder's lock (one at a time, whatever process), named by time, the outcome
 * recorded in status.json (or, when the folder cannot be written, in this process's count of
 * failures), and all but the newest `keep` deleted after a good one. Throws BackupError when it
 * fails; the database is never changed.
 */
export async function takeBackup(
  { data, folder, keep }: BackupPlace,
  options: {
    /** Called once if another backup into the folder runs and this one waits for it. */
    waiting?: () => void;
    /** Ends the wait for the folder (rowi stops). */
    signal?: AbortSignal;
    /** Called once this one holds the folder and starts copying. */
    starting?: () => Promise<void>;
  },
): Promise<{ manifest: BackupManifest; removed: string[] }> {
  const lock = await lockBackupFolder(folder, options.waiting, options.signal).catch(async (error: unknown) => {
    if (options.signal?.aborted) throw error;
    await countUnrecorded();
    throw new BackupError(`the backup folder ${folder} cannot be used (${describeFault(error)})`, {
      diskFull: (error as { code?: string }).code === 'ENOSPC',
    });
  });
  try {
    await options.starting?.();
    const target = join(folder, scheduledName(new Date()));
    try {
      const manifest = await backupSqlite(data, target);
      await recordOutcome(folder, { last_success_at: new Date().toISOString() }).catch(() => {});
      return { manifest, removed: await prune(folder, keep) };
    } catch (error) {
      const message = (error as Error).message;
      const failures = ((await readBackupStatus(folder))?.failures ?? 0) + 1;
      await recordOutcome(folder, { last_failure_at: new Date().toISOString(), failures, last_error: message }).catch(
        countUnrecorded,
      );
      throw error instanceof BackupError ? error : new BackupError(message);
    }
  } finally {
    await lock.release().catch(() => {});
  }
}

export function startBackupSchedule({
  intervalMs,
  log,
  ...place
}: BackupPlace & { intervalMs: number; log: FastifyBaseLogger }): BackupSchedule {
  const { data, folder } = place;
  let running: Promise<BackupManifest | undefined> | undefined;
  const attempt = async (): Promise<BackupManifest | undefined> => {
    try {
      const { manifest, removed } = await takeBackup(place, {
        waiting: () => log.info(`the scheduled backup of ${data} waits for the backup running into ${folder}`),
      });
      const target = join(folder, manifest.file);
      log.info(
        { backup: target, bytes: manifest.bytes, ms: manifest.ms, sha256: manifest.sha256, removed },
        `backup of ${data} taken: ${target}`,
      );
      return manifest;
    } catch (error) {
      const message = (error as Error).message;
      log.error({ folder }, `the scheduled backup of ${data} failed: ${message}; the next one tries again`);
      return undefined;
    }
  };
  const runOnce = () => (running ??= attempt().finally(() => (running = undefined)));
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const plan = (delayMs: number) => {
    if (closed) return;
    timer = setTimeout(() => void runOnce().finally(() => plan(intervalMs)), delayMs);
    timer.unref();
  };
  // The first one is due an interval after the newest backup in the folder (after the start when
  // there is none): a rowi restarted more often than its interval (each deploy) still takes them.
  void listBackups(folder)
    .then((backups) => {
      const newest = backups[0] === undefined ? Number.NaN : Date.parse(backups[0].taken_at);
      plan(Number.isNaN(newest) ? intervalMs : Math.max(0, Math.min(intervalMs, newest + intervalMs - Date.now())));
    })
    .catch(() => plan(intervalMs));
  return {
    runOnce,
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** Deletes all but the newest `keep` backups (and their manifests); returns the files removed. */
async function prune(folder: string, keep: number): Promise<string[]> {
  const old = (await listBackups(folder)).slice(keep).map((manifest) => join(folder, manifest.file));
  for (const file of old) {
    await rm(file, { force: true });
    await rm(manifestOf(file), { force: true });
  }
  return old;
}

/**
 * The schedule `rowi serve` runs when ROWI_BACKUP_DIR is set: in the one process, or in the
 * primary of --workers (each backup is copied by a process of its own; the primary serves nothing). PostgreSQL has its
 * own tools, and the setting is refused there.
 */
export function scheduleBackups(
  config: Pick<Config, 'backupDir' | 'backupInterval' | 'backupKeep' | 'data' | 'databaseUrl'>,
  log: FastifyBaseLogger,
): BackupSchedule | undefined {
  checkBackupSettings(config);
  if (config.backupDir === '') return undefined;
  log.info(
    { folder: config.backupDir, interval_s: config.backupInterval, keep: config.backupKeep },
    `a backup of ${config.data} is taken every ${config.backupInterval} s into ${config.backupDir}`,
  );
  return startBackupSchedule({
    data: config.data,
    folder: config.backupDir,
    intervalMs: config.backupInterval * 1000,
    keep: config.backupKeep,
    log,
  });
}

/** ROWI_BACKUP_DIR where there is no SQLite file to back up: a bad setting, said before anything starts. */
export function checkBackupSettings(config: Pick<Config, 'backupDir' | 'data' | 'databaseUrl'>): void {
  if (config.backupDir === '') return;
  if (config.databaseUrl !== '') throw new ConfigError(`ROWI_BACKUP_DIR is set, but ${POSTGRES_BACKUPS}`);
  if (config.data === ':memory:')
    throw new ConfigError('ROWI_BACKUP_DIR is set, but ROWI_DATA=:memory: has no file to back up');
}

export const POSTGRES_BACKUPS =
  'rowi backs up its SQLite file only; on PostgreSQL (ROWI_DATABASE_URL) use its own tools: pg_dump (or pg_basebackup with WAL archiving for point-in-time recovery), and pg_restore; see docs/backups.md';
