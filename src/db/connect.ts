import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type SqliteDialectConfig,
} from 'kysely';
import type { Config } from '../config.js';
import type { Database, Db } from './database.js';

export interface Storage {
  db: Db;
  /** What the banner and logs say about where data lives (never a password). */
  describe: string;
  close(): Promise<void>;
}

type SqliteSettings = Pick<Config, 'data' | 'sqliteSynchronous'>;

/**
 * Opens the embedded SQLite database, creating its folder and file on first start.
 *
 * - WAL journal: readers never block the writer, and a commit is one append to the log.
 * - synchronous: FULL by default, so a write acknowledged with 2xx survives a process crash and
 *   a power loss; NORMAL (opt-in) survives a process crash only. better-sqlite3 is built with
 *   NORMAL as its WAL default, so the pragma is set explicitly on every open.
 * - foreign_keys ON (SQLite leaves it off per connection) and a busy timeout, so that a second
 *   process on the same file (rowi serve --workers) waits for the write lock instead of failing.
 */
export function openSqlite(settings: SqliteSettings): Storage {
  if (settings.data !== ':memory:') mkdirSync(dirname(settings.data), { recursive: true });
  const sqlite = new SqliteDatabase(settings.data);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${settings.sqliteSynchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');

  const db = new Kysely<Database>({
    dialect: new RowiSqliteDialect({ database: withStatementCache(sqlite) }),
  });
  return {
    db,
    describe: `SQLite ${settings.data}`,
    close: () => db.destroy(),
  };
}

/**
 * Kysely's SQLite driver prepares every statement anew; preparing costs more than running a
 * read by key. Statements are reusable, so keep the most recent ones by their SQL text (the
 * SQL is built by Kysely from a bounded set of query shapes, parameters are bound separately).
 */
function withStatementCache(sqlite: SqliteDatabase.Database, capacity = 500) {
  const statements = new Map<string, SqliteDatabase.Statement>();
  return {
    close: () => sqlite.close(),
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

/**
 * Write transactions start with BEGIN IMMEDIATE: they take SQLite's write lock at once, so two
 * processes on one file never both read under a shared lock and then deadlock when each tries
 * to upgrade it (a plain BEGIN fails with SQLITE_BUSY in that case, whatever the busy timeout).
 */
class RowiSqliteDialect implements Dialect {
  readonly #config: SqliteDialectConfig;
  readonly #base: SqliteDialect;

  constructor(config: SqliteDialectConfig) {
    this.#config = config;
    this.#base = new SqliteDialect(config);
  }

  createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }

  createQueryCompiler() {
    return this.#base.createQueryCompiler();
  }

  createAdapter() {
    return this.#base.createAdapter();
  }

  createIntrospector(db: Kysely<unknown>) {
    return this.#base.createIntrospector(db);
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}
