import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { ConfigError, type Config } from '../config/config.js';
import { faultOf } from '../observability/logger.js';
import type { Database, Db } from './database.js';
import { postgresSignals, processSignals, type Signals } from './signals.js';
import { PreparingPool } from './prepared-statements.js';
import { startCheckpoints } from './checkpoints.js';
import { CorruptionWatch, repairAdvice } from './corruption.js';
import { isCorruption } from './driver-errors.js';
import { execute, openSqliteConnection } from './sqlite-connection.js';
import { RowiSqliteDialect } from './sqlite-driver.js';

export interface Storage {
  db: Db;
  kind: 'sqlite' | 'postgres';
  /** What the banner and logs say about where data lives (never a password). */
  describe: string;
  /** Word between the processes sharing this database (cache invalidation). */
  signals: Signals;
  /** Whether the database was found damaged, and the refusal of writes after it (corruption.ts). */
  corruption: CorruptionWatch;
  /**
   * Runs work on a connection of its own without the statement time limit: migrations, which
   * may wait for another instance's migration and may take long on large tables.
   */
  unbounded<T>(work: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * The configured database: PostgreSQL when ROWI_DATABASE_URL is set, else the SQLite file.
 * A database that cannot be opened or reached at start is a bad setting (exit 2), with
 * PostgreSQL's own reason (a wrong password, an unknown database) and never the password.
 */
export async function openStorage(config: Config, log: FastifyBaseLogger): Promise<Storage> {
  if (config.databaseUrl !== '') return openPostgres(config, log);
  try {
    return await openSqlite(config, log);
  } catch (error) {
    const damaged = isCorruption(error)
      ? `: it is not a SQLite database, or its first page is damaged. ${repairAdvice('sqlite', config.data)}`
      : '';
    throw new ConfigError(
      `ROWI_DATA=${JSON.stringify(config.data)} cannot be opened as a SQLite database: ${(error as Error).message}${damaged}`,
    );
  }
}

type SqliteSettings = Pick<Config, 'data' | 'sqliteSynchronous'> & Partial<Pick<Config, 'databaseTimeout'>>;

/** How long a migration waits for another process's write lock (another instance migrating). */
const MIGRATION_LOCK_WAIT_MS = 10 * 60 * 1000;

/** Past this size, a write-ahead log that has been checkpointed whole is cut back to it. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

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
export async function openSqlite(settings: SqliteSettings, log?: FastifyBaseLogger): Promise<Storage> {
  const inMemory = settings.data === ':memory:';
  if (!inMemory) mkdirSync(dirname(settings.data), { recursive: true });
  const options = { synchronous: settings.sqliteSynchronous, busyTimeoutMs: 0 };
  const signals = processSignals();
  const describe = `SQLite ${settings.data}`;
  const corruption = new CorruptionWatch({ kind: 'sqlite', describe, file: settings.data, log, signals });
  const writer = await openSqliteConnection(settings.data, { ...options, guard: corruption.writerGuard });
  for (const pragma of ['wal_autocheckpoint = 0', `journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`])
    execute(writer.prepare(`pragma ${pragma}`));
  // An in-memory database exists on its one connection only.
  const reader = inMemory
    ? writer
    : await openSqliteConnection(settings.data, { ...options, guard: corruption.readerGuard });
  const db = new Kysely<Database>({
    dialect: new RowiSqliteDialect({
      writer,
      reader,
      lockTimeoutMs: settings.databaseTimeout ?? 5000,
      ...diskFullReporter(settings.data, log),
    }),
  });
  const checkpoints = inMemory
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
      const patient = new Kysely<Database>({
        dialect: new RowiSqliteDialect({
          writer: connection,
          reader: connection,
          lockTimeoutMs: MIGRATION_LOCK_WAIT_MS,
        }),
      });
      try {
        return await work(patient);
      } finally {
        await patient.destroy();
      }
    },
    async close() {
      await signals.close();
      await db.destroy();
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

type PostgresSettings = Pick<Config, 'databaseUrl' | 'databasePoolSize' | 'databaseTimeout'>;

/** PostgreSQL's int8 (ids, money in cents, counts) as a JS number: every value rowi stores is a safe integer. */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => Number(text)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * A pool of at most ROWI_DATABASE_POOL_SIZE connections. A request waits at most
 * ROWI_DATABASE_TIMEOUT ms for a connection and a statement runs at most as long; either limit
 * ends in an error that the problem handler answers with 503 and Retry-After (isUnavailable).
 * A connection idle inside a transaction (a process stuck or gone) is ended by the server.
 */
export async function openPostgres(settings: PostgresSettings, log: FastifyBaseLogger): Promise<Storage> {
  const clientConfig: pg.ClientConfig = {
    connectionString: settings.databaseUrl,
    statement_timeout: settings.databaseTimeout,
    idle_in_transaction_session_timeout: Math.max(settings.databaseTimeout * 2, 10_000),
    connectionTimeoutMillis: settings.databaseTimeout,
    application_name: 'rowi',
    keepAlive: true,
    types,
  };
  const pool = watchedPool({ ...clientConfig, max: settings.databasePoolSize, idleTimeoutMillis: 30_000 }, log);
  const where = describePostgres(settings.databaseUrl);
  let schema: string;
  try {
    const { rows } = await pool.query<{ schema: string | null }>('select current_schema() as schema');
    schema = rows[0]?.schema ?? '';
    if (schema === '')
      throw new Error('no schema is on the search_path (set options=-c search_path=… or create the schema)');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new ConfigError(`ROWI_DATABASE_URL (${where}) cannot be used: ${(error as Error).message}`);
  }
  const describe = `PostgreSQL ${where}${schema === 'public' ? '' : ` schema ${schema}`}`;
  const corruption = new CorruptionWatch({ kind: 'postgres', describe, log });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: new PreparingPool(pool, corruption.observe) }),
  });
  const signals = postgresSignals(pool, clientConfig, `rowi.${schema}`, log);
  return {
    db,
    kind: 'postgres',
    describe,
    signals,
    corruption,
    async unbounded(work) {
      const { statement_timeout: _limit, ...unlimited } = clientConfig;
      const single = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: watchedPool({ ...unlimited, max: 1 }, log) }),
      });
      try {
        return await work(single);
      } finally {
        await single.destroy();
      }
    },
    async close() {
      await signals.close();
      await db.destroy();
    },
  };
}

/** A pool whose lost connections are logged instead of ending the process. */
function watchedPool(config: pg.PoolConfig, log: FastifyBaseLogger): pg.Pool {
  const pool = new pg.Pool(config);
  // An idle connection that the server drops (a restart) is discarded; nothing to answer.
  // One short line naming the fault: the error pg emits here carries the whole client.
  pool.on('error', (error) => log.warn(`database connection lost: ${faultOf(error)} (an idle one; it is replaced)`));
  // A connection lost while a request holds it fails that request's query (a 503), and pg also
  // emits 'error' on the client, which the pool does not listen to while the client is checked
  // out: without a listener of its own, that event would end the process. The pool discards the
  // client when it is released.
  pool.on('connect', (client) =>
    client.on('error', (error) => log.debug(`database connection lost: ${faultOf(error)} (one in use)`)),
  );
  return pool;
}

/** user@host:port/database, without the password or the query. */
export function describePostgres(url: string): string {
  try {
    const parsed = new URL(url);
    const user = parsed.username === '' ? '' : `${decodeURIComponent(parsed.username)}@`;
    return `${user}${parsed.host}${parsed.pathname}`;
  } catch {
    return 'an unparsable URL';
  }
}
