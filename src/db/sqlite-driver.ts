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
import { isDiskFull } from './driver-errors.js';
import { FLUSH_LATER } from './unit-of-work.js';
import { GroupCommitWriter, type UnitSession, type WriterOptions } from './group-commit.js';
import { execute, type SqliteConnectionHandle } from './sqlite-connection.js';
import { whenUnlocked } from './sqlite-lock.js';

/**
 * rowi's SQLite driver for Kysely: reads on a connection of their own, and every transaction a
 * unit of a group that commits once (group commit, group-commit.ts).
 *
 * - Reads outside a transaction run on the reader connection, which sees the last committed
 *   state (WAL), and never wait for a write.
 * - Writes happen in transactions (the unit of work, db/unit-of-work.ts), on the writer
 *   connection, when the writer gives the unit its turn in a group; a unit's commit resolves
 *   once its group's COMMIT is on disk.
 * - A write outside a transaction becomes a unit of its own.
 */
export interface SqliteDriverOptions extends WriterOptions {
  /** The connection reads use; the writer itself for an in-memory database, which has no other. */
  reader: SqliteConnectionHandle;
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

class RowiSqliteDriver implements Driver {
  readonly #options: SqliteDriverOptions;
  readonly #writer: GroupCommitWriter;

  constructor(options: SqliteDriverOptions) {
    this.#options = options;
    this.#writer = new GroupCommitWriter(options);
  }

  async init(): Promise<void> {}

  /** No connection is held: a session reads on the reader, and writes when the writer gives it its turn. */
  async acquireConnection(): Promise<DatabaseConnection> {
    return new Session(this.#options, this.#writer);
  }

  /** The unit takes its turn at its first statement (Session.executeQuery), which may say it can flush later. */
  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    (connection as Session).entering = { flushLater: false };
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const session = connection as Session;
    // A transaction that ran no statement wrote nothing: no turn to take.
    if (session.entering !== undefined) session.entering = undefined;
    else await this.#writer.commit(session);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const session = connection as Session;
    if (session.entering !== undefined) session.entering = undefined;
    else this.#writer.rollback(session);
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    const session = connection as Session;
    await session.enter();
    session.own(`savepoint "${name}"`);
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    if (this.#options.writer.inTransaction) (connection as Session).own(`rollback to savepoint "${name}"`);
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    (connection as Session).own(`release savepoint "${name}"`);
  }

  async releaseConnection(): Promise<void> {}

  async destroy(): Promise<void> {
    await this.#writer.idle();
    this.#options.writer.close();
    if (this.#options.reader !== this.#options.writer) this.#options.reader.close();
  }
}

/** One request's use of the database: reads, or one unit of work (a transaction). */
class Session implements DatabaseConnection, UnitSession {
  /** Set while the writer runs this session's unit. */
  unit: { savepoint: string | undefined; done: boolean } | undefined;
  /** Set from BEGIN until the unit's first statement, when it takes its turn of the writer. */
  entering: { flushLater: boolean } | undefined;
  readonly #options: SqliteDriverOptions;
  readonly #writer: GroupCommitWriter;

  constructor(options: SqliteDriverOptions, writer: GroupCommitWriter) {
    this.#options = options;
    this.#writer = writer;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    // PostgreSQL's words for a unit that need not wait for the disk (unit-of-work.ts): said first,
    // it decides the group the unit enters; said later, it changes nothing.
    if (compiled.sql === FLUSH_LATER && (this.entering !== undefined || this.unit !== undefined)) {
      if (this.entering !== undefined) this.entering.flushLater = true;
      return { rows: [] };
    }
    if (this.entering !== undefined) await this.enter();
    if (this.unit !== undefined) return runOn(this.#options.writer, compiled, this.#options);
    if (isRead(compiled))
      return whenUnlocked(() => runOn(this.#options.reader, compiled, this.#options), this.#options.lockTimeoutMs);
    return this.#alone(compiled);
  }

  /** Takes the unit's turn of the writer, if its transaction has begun and not taken it yet. */
  async enter(): Promise<void> {
    const entering = this.entering;
    if (entering === undefined) return;
    this.entering = undefined;
    await this.#writer.enter(this, entering.flushLater);
  }

  /** A write outside a transaction: a unit of its own. */
  async #alone<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const unit = new Session(this.#options, this.#writer);
    await this.#writer.enter(unit);
    let result: QueryResult<R>;
    try {
      result = runOn(this.#options.writer, compiled, this.#options);
    } catch (error) {
      this.#writer.rollback(unit);
      throw error;
    }
    await this.#writer.commit(unit);
    return result;
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('rowi does not stream SQLite queries');
  }

  /** A statement of the session's own unit (its savepoints). */
  own(sql: string): void {
    execute(this.#options.writer.prepare(sql));
  }
}

function runOn<R>(
  connection: SqliteConnectionHandle,
  compiled: CompiledQuery,
  options: SqliteDriverOptions,
): QueryResult<R> {
  const statement = connection.prepare(compiled.sql);
  if (statement.reader) return { rows: statement.all(compiled.parameters) as R[] };
  try {
    const { changes, lastInsertRowid } = statement.run(compiled.parameters);
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  } catch (error) {
    if (isDiskFull(error)) options.onDiskFull?.(error);
    throw error;
  }
}

/** A query that only reads: a SELECT (Kysely's query tree says so), or raw SQL that is one. */
function isRead(compiled: CompiledQuery): boolean {
  const kind = compiled.query.kind;
  if (kind === 'SelectQueryNode') return true;
  return (
    kind === 'RawNode' && /^\s*(select|pragma\s+[\w.]+\s*(\(\s*[\w.]+\s*\))?\s*;?\s*$|explain)\b/i.test(compiled.sql)
  );
}
