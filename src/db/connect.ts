import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { ConfigError, type Config } from '../config/config.js';
import { processSignals } from './signals.js';
import { databaseHandle, withHandleBeside, type Storage } from './storage.js';
import { startCheckpoints } from './checkpoints.js';
import { CorruptionWatch, repairAdvice } from './corruption.js';
import { isCorruption } from './driver-errors.js';
import { DatabaseOutage } from './outage.js';
import { execute, openSqliteConnection } from './sqlite-connection.js';
import { RowiSqliteDialect } from './sqlite-driver.js';
import { ReadCache, walIndexWatch } from './read-cache.js';

export type { Storage } from './storage.js';

/**
 * The configured database: PostgreSQL when ROWI_DATABASE_URL is set, else the SQLite file.
 * A database that cannot be opened or reached at start is a bad setting (exit 2), with
 * PostgreSQL's own reason (a wrong password, an unknown database) and never the password.
 */
export async function openStorage(config: Config, log: FastifyBaseLogger, options: OpenOptions = {}): Promise<Storage> {
  // PostgreSQL's driver is loaded only when it is used: a rowi on SQLite never holds it (about 14 MB).
  if (config.databaseUrl !== '')
    return (await import('./postgres.js')).openPostgres(config, log, { listens: options.signals ?? true });
  try {
    return await openSqlite(config, log, options);
  } catch (error) {
    const damaged = isCorruption(error)
      ? `: it is not a SQLite database, or its first page is damaged. ${repairAdvice('sqlite', config.data)}`
      : '';
    throw new ConfigError(
      `ROWI_DATA=${JSON.stringify(config.data)} cannot be opened as a SQLite database: ${(error as Error).message}${damaged}`,
    );
  }
}

/** A second opening of the database in a process (its webhook thread) leaves these to the first. */
export interface OpenOptions {
  /** Whether it checkpoints the SQLite file. */
  checkpoints?: boolean;
  /** Whether it listens for the signals of other instances (PostgreSQL: a connection of its own). */
  signals?: boolean;
}

type SqliteSettings = Pick<Config, 'data' | 'sqliteSynchronous'> &
  Partial<Pick<Config, 'databaseTimeout' | 'readCache'>>;

/** How long a migration waits for another process's write lock (another instance migrating). */
const MIGRATION_LOCK_WAIT_MS = 10 * 60 * 1000;

/** Past this size, a write-ahead log that has been checkpointed whole is cut back to it. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * The reader's page cache, in KiB: SQLite's own default (2,000 KiB, node:sqlite's), set because
 * better-sqlite3 is built with 16,000. The reader's cache is emptied whenever another connection
 * commits (WAL mode: docs/events.md), so on a service that writes it rarely holds much for long;
 * but one long read (an export of 1,000,000 orders, its size check) filled all 16 MB, 15 MB of
 * the process's RSS growth during the export, never given back. Pages it misses come from the
 * operating system's cache (bench/NOTES.md "Reading in bulk").
 */
const READER_PAGE_CACHE_KIB = 2000;

/**
 * Opens the embedded SQLite database, creating its folder and file on first start, with
 * whichever driver this Node.js has (sqlite-connection.ts).
 *
 * - WAL journal: readers never block the writer, and a commit is one append to the log.
 * - synchronous: FULL by default, so a write acknowledged with 2xx survives a process crash and
 *   a power loss; NORMAL (opt-in) survives a process crash only. Set explicitly on every open.
 * - foreign_keys ON (SQLite leaves it off per connection).
 * - Two connections: the writer, through which every write goes in groups that commit once
 *   (sqlite-driver.ts), and the reader, for reads outside a transaction. Neither has a busy
 *   timeout: SQLite would wait for another process's write lock on the event loop; the driver
 *   waits between attempts instead, up to ROWI_DATABASE_TIMEOUT.
 * - WAL checkpoints run on a thread of their own (checkpoints.ts), not inside a COMMIT on the
 *   thread that answers requests.
 * - Migrations get a connection of their own that may wait long: another instance may be migrating.
 */
export async function openSqlite(
  settings: SqliteSettings,
  log?: FastifyBaseLogger,
  { checkpoints: checkpointing = true }: OpenOptions = {},
): Promise<Storage> {
  const inMemory = settings.data === ':memory:';
  if (!inMemory) mkdirSync(dirname(settings.data), { recursive: true });
  const options = { synchronous: settings.sqliteSynchronous, busyTimeoutMs: 0 };
  const signals = processSignals();
  const describe = `SQLite ${settings.data}`;
  const corruption = new CorruptionWatch({ kind: 'sqlite', describe, file: settings.data, log, signals });
  const writer = await openSqliteConnection(settings.data, { ...options, guard: corruption.writerGuard });
  // temp_store = MEMORY: every unit of a group but the first runs in a savepoint, whose journal
  // (the pages the unit changes, as they were) SQLite keeps in memory up to 64 KiB and past that in
  // a temporary file: an order changes about twenty pages, so each one wrote and read a file, about
  // half of SQLite's time an order. The journal lives until the unit ends, bounded by what one
  // unit changes. The reader keeps temporary files (an export's sort may be large).
  for (const pragma of [
    'wal_autocheckpoint = 0',
    `journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`,
    'temp_store = MEMORY',
  ])
    execute(writer.prepare(`pragma ${pragma}`));
  // An in-memory database exists on its one connection only.
  const reader = inMemory
    ? writer
    : await openSqliteConnection(settings.data, { ...options, guard: corruption.readerGuard });
  if (reader !== writer) execute(reader.prepare(`pragma cache_size = -${READER_PAGE_CACHE_KIB}`));
  const outage = new DatabaseOutage(log);
  // Records read by id, kept until anything is committed to the file (read-cache.ts); a database in
  // memory reads on its writer, which sees what its open transaction wrote: none kept there.
  const cache =
    inMemory || !settings.readCache
      ? undefined
      : new ReadCache(settings.readCache * 1024 * 1024, walIndexWatch(settings.data));
  const db = databaseHandle(
    new RowiSqliteDialect({
      writer,
      reader,
      lockTimeoutMs: settings.databaseTimeout ?? 5000,
      synchronous: settings.sqliteSynchronous,
      ...diskFullReporter(settings.data, log),
    }),
    outage,
    undefined,
    cache,
  );
  outage.watch(db);
  const checkpoints =
    inMemory || !checkpointing
      ? undefined
      : startCheckpoints(settings.data, settings.sqliteSynchronous === 'normal' ? 'NORMAL' : 'FULL', log);
  return {
    db,
    kind: 'sqlite',
    describe,
    signals,
    corruption,
    async unbounded(work) {
      if (inMemory) return work(db);
      const connection = await openSqliteConnection(settings.data, {
        ...options,
        busyTimeoutMs: MIGRATION_LOCK_WAIT_MS,
        guard: corruption.writerGuard,
      });
      const patient = new RowiSqliteDialect({
        writer: connection,
        reader: connection,
        lockTimeoutMs: MIGRATION_LOCK_WAIT_MS,
      });
      return withHandleBeside(db, patient, work);
    },
    async close() {
      outage.stop();
      await signals.close();
      await db.destroy();
      cache?.close();
      await checkpoints?.close();
    },
  };
}

/**
 * The log names a full disk once, when writes start failing for lack of space, and says when they
 * go through again, instead of an error line for every refused request (each still gets its 507).
 */
function diskFullReporter(file: string, log: FastifyBaseLogger | undefined) {
  let full = false;
  return {
    onDiskFull(error: unknown) {
      if (full) return;
      full = true;
      log?.error(
        { err: error, file },
        `the disk holding ${file} is full: writes are refused (507) until space is freed; reads go on`,
      );
    },
    onWritten() {
      if (!full) return;
      full = false;
      log?.info({ file }, `writes to ${file} succeed again: the disk has space`);
    },
  };
}
