import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { ConfigError, type Config } from '../config.js';
import type { Database, Db } from './database.js';
import { postgresSignals, processSignals, type Signals } from './signals.js';
import { RowiSqliteDialect, type SqliteConnectionHandle } from './sqlite-driver.js';

export interface Storage {
  db: Db;
  kind: 'sqlite' | 'postgres';
  /** What the banner and logs say about where data lives (never a password). */
  describe: string;
  /** Word between the processes sharing this database (cache invalidation). */
  signals: Signals;
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
    return openSqlite(config, log);
  } catch (error) {
    throw new ConfigError(`ROWI_DATA=${JSON.stringify(config.data)} cannot be opened as a SQLite database: ${(error as Error).message}`);
  }
}

type SqliteSettings = Pick<Config, 'data' | 'sqliteSynchronous'> & Partial<Pick<Config, 'databaseTimeout'>>;

/** How long a migration waits for another process's write lock (another instance migrating). */
const MIGRATION_LOCK_WAIT_MS = 10 * 60 * 1000;

/**
 * Opens the embedded SQLite database, creating its folder and file on first start.
 *
 * - WAL journal: readers never block the writer, and a commit is one append to the log.
 * - synchronous: FULL by default, so a write acknowledged with 2xx survives a process crash and
 *   a power loss; NORMAL (opt-in) survives a process crash only. better-sqlite3 is built with
 *   NORMAL as its WAL default, so the pragma is set explicitly on every open.
 * - foreign_keys ON (SQLite leaves it off per connection).
 * - No busy timeout on the connection requests use: SQLite would wait for another process's
 *   write lock on the event loop. The driver waits between attempts instead, up to
 *   ROWI_DATABASE_TIMEOUT (sqlite-driver.ts). Migrations get a connection of their own that
 *   may wait long: another instance may be migrating.
 */
export function openSqlite(settings: SqliteSettings, log?: FastifyBaseLogger): Storage {
  if (settings.data !== ':memory:') mkdirSync(dirname(settings.data), { recursive: true });
  const sqlite = openSqliteConnection(settings, 0);
  const diskFull = diskFullReporter(settings.data, log);
  const db = new Kysely<Database>({
    dialect: new RowiSqliteDialect({ database: withStatementCache(sqlite), lockTimeoutMs: settings.databaseTimeout ?? 5000, ...diskFull }),
  });
  const signals = processSignals();
  return {
    db,
    kind: 'sqlite',
    describe: `SQLite ${settings.data}`,
    signals,
    async unbounded(work) {
      // An in-memory database exists on its one connection only.
      if (settings.data === ':memory:') return work(db);
      const patient = new Kysely<Database>({
        dialect: new RowiSqliteDialect({ database: withStatementCache(openSqliteConnection(settings, MIGRATION_LOCK_WAIT_MS)), lockTimeoutMs: MIGRATION_LOCK_WAIT_MS }),
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
    },
  };
}

function openSqliteConnection(settings: SqliteSettings, busyTimeoutMs: number): SqliteDatabase.Database {
  const sqlite = new SqliteDatabase(settings.data);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${settings.sqliteSynchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${busyTimeoutMs}`);
  return sqlite;
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
      log?.error({ err: error, file }, `the disk holding ${file} is full: writes are refused (507) until space is freed; reads go on`);
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
    oid === INT8_OID && format !== 'binary' ? (text: string) => Number(text) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
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
    if (schema === '') throw new Error('no schema is on the search_path (set options=-c search_path=… or create the schema)');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new ConfigError(`ROWI_DATABASE_URL (${where}) cannot be used: ${(error as Error).message}`);
  }
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const signals = postgresSignals(pool, clientConfig, `rowi.${schema}`, log);
  return {
    db,
    kind: 'postgres',
    describe: `PostgreSQL ${where}${schema === 'public' ? '' : ` schema ${schema}`}`,
    signals,
    async unbounded(work) {
      const { statement_timeout: _limit, ...unlimited } = clientConfig;
      const single = new Kysely<Database>({ dialect: new PostgresDialect({ pool: watchedPool({ ...unlimited, max: 1 }, log) }) });
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
  pool.on('error', (error) => log.warn({ err: error }, 'an idle PostgreSQL connection was lost'));
  // A connection lost while a request holds it fails that request's query (a 503), and pg also
  // emits 'error' on the client, which the pool does not listen to while the client is checked
  // out: without a listener of its own, that event would end the process. The pool discards the
  // client when it is released.
  pool.on('connect', (client) => client.on('error', (error) => log.debug({ err: error }, 'a PostgreSQL connection in use was lost')));
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

/**
 * Kysely's SQLite driver prepares every statement anew; preparing costs more than running a
 * read by key. Statements are reusable, so keep the most recent ones by their SQL text (the
 * SQL is built by Kysely from a bounded set of query shapes, parameters are bound separately).
 */
function withStatementCache(sqlite: SqliteDatabase.Database, capacity = 500): SqliteConnectionHandle {
  const statements = new Map<string, SqliteDatabase.Statement>();
  return {
    close: () => void sqlite.close(),
    get inTransaction() {
      return sqlite.inTransaction;
    },
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = sqlite.prepare(sql);
        if (statements.size >= capacity) statements.delete(statements.keys().next().value as string);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}
