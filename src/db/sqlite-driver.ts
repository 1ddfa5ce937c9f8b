import {
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';
import { isDiskFull } from './errors.js';

/**
 * rowi's SQLite driver for Kysely, on one better-sqlite3 connection. Kysely's own serialises every
 * query of the connection behind a mutex; this one does too, and differs where rowi needs it to:
 *
 * - Write transactions start with BEGIN IMMEDIATE: they take SQLite's write lock at once, so two
 *   processes on one file never both read under a shared lock and then deadlock when each tries
 *   to upgrade it (a plain BEGIN fails with SQLITE_BUSY then, whatever the busy timeout).
 * - The lock is waited for without stopping the process. SQLite's own busy timeout sleeps inside
 *   the call, on the event loop: while another process held the lock, this one answered nothing,
 *   probes included (/health/live took 9.5 s). Here the connection has no busy timeout; a BEGIN
 *   IMMEDIATE, or a statement outside a transaction, that finds the database locked is tried
 *   again after a short, growing pause, with the mutex released meanwhile so that reads go on,
 *   until `lockTimeoutMs` has passed; then SQLITE_BUSY reaches the caller (503 with Retry-After).
 * - ROLLBACK is sent only while a transaction is open: SQLite ends a transaction by itself on
 *   some errors (a full disk at COMMIT), and the failing ROLLBACK ("cannot rollback - no
 *   transaction is active") used to hide the real error.
 * - It tells `onDiskFull` when a write fails for lack of space, and `onWritten` when one succeeds,
 *   so the log can name the cause once, and say when writes go through again.
 */
/** What the driver needs of a SQLite connection (better-sqlite3's, with its statements cached). */
export interface SqliteConnectionHandle {
  prepare(sql: string): SqliteStatement;
  readonly inTransaction: boolean;
  close(): void;
}

export interface SqliteStatement {
  /** Whether the statement returns rows. */
  readonly reader: boolean;
  all(parameters: readonly unknown[]): unknown[];
  run(parameters?: readonly unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

export interface SqliteDriverOptions {
  database: SqliteConnectionHandle;
  /** Milliseconds to wait for the write lock before SQLITE_BUSY. */
  lockTimeoutMs: number;
  onDiskFull?: (error: unknown) => void;
  onWritten?: () => void;
}

export class RowiSqliteDialect implements Dialect {
  readonly #options: SqliteDriverOptions;

  constructor(options: SqliteDriverOptions) {
    this.#options = options;
  }

  createDriver(): Driver {
    return new RowiSqliteDriver(this.#options);
  }

  createQueryCompiler() {
    return new SqliteQueryCompiler();
  }

  createAdapter() {
    return new SqliteAdapter();
  }

  createIntrospector(db: Kysely<unknown>) {
    return new SqliteIntrospector(db);
  }
}

/** Pauses between attempts at a locked database: short at first (most locks are held for milliseconds), never long. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 25;

class RowiSqliteDriver implements Driver {
  readonly #options: SqliteDriverOptions;
  readonly #mutex = new Mutex();
  readonly #connection: RowiSqliteConnection;

  constructor(options: SqliteDriverOptions) {
    this.#options = options;
    this.#connection = new RowiSqliteConnection(options, this.#mutex);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock();
    return this.#connection;
  }

  async beginTransaction(): Promise<void> {
    await this.#connection.whenUnlocked(() => this.#connection.run('begin immediate'));
  }

  async commitTransaction(): Promise<void> {
    this.#connection.write('commit');
  }

  async rollbackTransaction(): Promise<void> {
    if (this.#options.database.inTransaction) this.#connection.run('rollback');
  }

  async savepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    this.#connection.run(`savepoint "${name}"`);
  }

  async rollbackToSavepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    if (this.#options.database.inTransaction) this.#connection.run(`rollback to savepoint "${name}"`);
  }

  async releaseSavepoint(_connection: DatabaseConnection, name: string): Promise<void> {
    this.#connection.run(`release savepoint "${name}"`);
  }

  async releaseConnection(): Promise<void> {
    this.#mutex.unlock();
  }

  async destroy(): Promise<void> {
    this.#options.database.close();
  }
}

class RowiSqliteConnection implements DatabaseConnection {
  readonly #options: SqliteDriverOptions;
  readonly #mutex: Mutex;

  constructor(options: SqliteDriverOptions, mutex: Mutex) {
    this.#options = options;
    this.#mutex = mutex;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const statement = this.#options.database.prepare(compiled.sql);
    const { parameters } = compiled;
    // Inside a transaction this connection holds the write lock already; outside one, a
    // statement may meet another process's lock and waits for it like BEGIN IMMEDIATE does.
    const execute = () => {
      if (statement.reader) return { rows: statement.all(parameters) as R[] };
      const { changes, lastInsertRowid } = this.#written(() => statement.run(parameters));
      return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] as R[] };
    };
    return this.#options.database.inTransaction ? execute() : this.whenUnlocked(execute);
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('rowi does not stream SQLite queries');
  }

  /** A statement without parameters or results (BEGIN, ROLLBACK, SAVEPOINT…). */
  run(sql: string): void {
    this.#options.database.prepare(sql).run();
  }

  /** A statement that writes to the file (COMMIT): its failure for lack of space is reported. */
  write(sql: string): void {
    this.#written(() => this.#options.database.prepare(sql).run());
  }

  #written<T>(write: () => T): T {
    try {
      const result = write();
      if (!this.#options.database.inTransaction) this.#options.onWritten?.();
      return result;
    } catch (error) {
      if (isDiskFull(error)) this.#options.onDiskFull?.(error);
      throw error;
    }
  }

  /**
   * Runs `attempt`, again after a pause while it finds the database locked by another process
   * (SQLITE_BUSY), until the lock timeout. The caller holds the mutex; it is released during each
   * pause, so this connection's other queries (reads) are not held up by the wait.
   */
  async whenUnlocked<T>(attempt: () => T): Promise<T> {
    const deadline = performance.now() + this.#options.lockTimeoutMs;
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
      try {
        return attempt();
      } catch (error) {
        if (!isBusy(error) || performance.now() + pause > deadline) throw error;
      }
      this.#mutex.unlock();
      await new Promise((resolve) => setTimeout(resolve, pause));
      await this.#mutex.lock();
    }
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}

/** One holder at a time, in the order they asked. */
class Mutex {
  #held = false;
  readonly #waiting: (() => void)[] = [];

  lock(): Promise<void> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  unlock(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#held = false;
  }
}
