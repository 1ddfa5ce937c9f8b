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
import { codeOf, isDiskFull } from './errors.js';
import { execute, type SqliteConnectionHandle } from './sqlite-connection.js';

/**
 * rowi's SQLite driver for Kysely: reads on a connection of their own, and every transaction a
 * unit of a group that commits once (group commit).
 *
 * - Reads outside a transaction run on the reader connection, which sees the last committed
 *   state (WAL), and never wait for a write.
 * - Writes happen in transactions (the unit of work, db/unit-of-work.ts), on the writer
 *   connection: the writer opens one SQLite transaction for a group of them, runs them one after
 *   another, each in a SAVEPOINT of its own (a unit that fails rolls back only itself), and
 *   commits the group once: one fsync for many requests. A unit's commit resolves only after the
 *   COMMIT of its group, so a 2xx still means "on disk" under synchronous=FULL. A group takes
 *   the units waiting when it opens and those that come while it is open: it stays open across
 *   turns of the event loop while each turn brings new units (under load, the requests answered
 *   by the last COMMIT come back with their next write), and commits after a turn that brought
 *   none, at GROUP_UNITS units, or GROUP_WINDOW_MS after it opened. Units run back to back for at
 *   most SLICE_MS before the writer lets the event loop read sockets and answer reads.
 * - A write outside a transaction becomes a unit of its own.
 * - The group's BEGIN IMMEDIATE takes SQLite's write lock at once (two processes on one file
 *   never deadlock upgrading a shared lock). When another process holds it, the writer tries again
 *   after a short, growing pause, off the event loop (requests and reads go on), until
 *   `lockTimeoutMs`; then SQLITE_BUSY reaches every unit waiting (503 with Retry-After). SQLite's
 *   own busy timeout would sleep on the event loop: the writer connection has none.
 * - ROLLBACK is sent only while a transaction is open: SQLite ends one by itself on some errors
 *   (a full disk at COMMIT), and a failing ROLLBACK would hide the real error.
 * - `onDiskFull` and `onWritten` let the log name a full disk once, and say when writes succeed again.
 */
export interface SqliteDriverOptions {
  writer: SqliteConnectionHandle;
  /** The connection reads use; the writer itself for an in-memory database, which has no other. */
  reader: SqliteConnectionHandle;
  lockTimeoutMs: number;
  onDiskFull?: (error: unknown) => void;
  onWritten?: () => void;
}

/** The savepoint of the unit that runs. */
const UNIT_SAVEPOINT = 'unit';

/**
 * Units a group takes at most, and how long it may stay open. Each COMMIT waits for the disk (an
 * fsync under synchronous=FULL: about 1.4 ms here) on the event loop, so the more units share it
 * the less each pays; a unit waits at most the window for its COMMIT.
 */
const GROUP_UNITS = 128;
const GROUP_WINDOW_MS = 12;
/** How long units may run back to back on the event loop before it is given back for a turn. */
const SLICE_MS = 4;

/** Pauses between attempts at a locked database: short at first (most locks are held for milliseconds), never long. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 25;

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

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await this.#writer.enter(connection as Session);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await this.#writer.commit(connection as Session);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    this.#writer.rollback(connection as Session);
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    (connection as Session).own(`savepoint "${name}"`);
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
class Session implements DatabaseConnection {
  /** Set while the writer runs this session's unit. */
  unit: { savepoint: string; done: boolean } | undefined;
  readonly #options: SqliteDriverOptions;
  readonly #writer: GroupCommitWriter;

  constructor(options: SqliteDriverOptions, writer: GroupCommitWriter) {
    this.#options = options;
    this.#writer = writer;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    if (this.unit !== undefined) return runOn(this.#options.writer, compiled, this.#options);
    if (isRead(compiled)) return whenUnlocked(() => runOn(this.#options.reader, compiled, this.#options), this.#options.lockTimeoutMs);
    // A write outside a transaction is a unit of its own.
    return this.#writer.alone(() => runOn(this.#options.writer, compiled, this.#options));
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('rowi does not stream SQLite queries');
  }

  /** A statement of the session's own unit (its savepoints). */
  own(sql: string): void {
    execute(this.#options.writer.prepare(sql));
  }
}

function runOn<R>(connection: SqliteConnectionHandle, compiled: CompiledQuery, options: SqliteDriverOptions): QueryResult<R> {
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
  return kind === 'RawNode' && /^\s*(select|pragma\s+[\w.]+\s*(\(\s*[\w.]+\s*\))?\s*;?\s*$|explain)\b/i.test(compiled.sql);
}

/** A unit waiting for the writer, and what to tell it. */
interface Waiting {
  session: Session;
  start: () => void;
  fail: (error: unknown) => void;
}

/** What the units of the open group wait for: its COMMIT. */
interface Group {
  startedAt: number;
  units: number;
  members: { resolve: () => void; reject: (error: unknown) => void }[];
}

class GroupCommitWriter {
  readonly #options: SqliteDriverOptions;
  readonly #waiting: Waiting[] = [];
  #group: Group | undefined;
  /** The session whose unit runs now. */
  #active: Session | undefined;
  /** True while the writer is opening a group or committing one (possibly waiting for the lock). */
  #busy = false;
  #commitScheduled = false;
  #yielding = false;
  /** When units began to run back to back (the group opened, or the event loop was last given back). */
  #sliceStartedAt = 0;
  /** Whether a unit has asked to enter since the writer last looked (a turn of the event loop that brought work). */
  #arrived = false;
  #idle: (() => void)[] = [];

  constructor(options: SqliteDriverOptions) {
    this.#options = options;
  }

  /** Resolves when it is the session's turn: a group is open and a savepoint taken for its unit. */
  enter(session: Session): Promise<void> {
    return new Promise((start, fail) => {
      this.#waiting.push({ session, start, fail });
      this.#arrived = true;
      this.#advance();
    });
  }

  /** Ends the session's unit (RELEASE) and resolves once its group has committed. */
  commit(session: Session): Promise<void> {
    const unit = session.unit!;
    unit.done = true;
    const committed = new Promise<void>((resolve, reject) => this.#group!.members.push({ resolve, reject }));
    try {
      session.own(`release savepoint "${unit.savepoint}"`);
    } catch (error) {
      this.#group!.members.pop();
      this.#end(session);
      return Promise.reject(error);
    }
    this.#end(session);
    return committed;
  }

  /** Undoes the session's unit (ROLLBACK TO its savepoint); the rest of the group goes on. */
  rollback(session: Session): void {
    const unit = session.unit;
    // After a failed commit (the group's COMMIT) there is nothing of this unit left to undo.
    if (unit === undefined || unit.done) return;
    unit.done = true;
    if (this.#options.writer.inTransaction) {
      session.own(`rollback to savepoint "${unit.savepoint}"`);
      session.own(`release savepoint "${unit.savepoint}"`);
    }
    this.#end(session);
  }

  /** Runs one statement as a unit of its own (a write outside a transaction). */
  async alone<T>(work: () => T): Promise<T> {
    const session = new Session(this.#options, this);
    await this.enter(session);
    let result: T;
    try {
      result = work();
    } catch (error) {
      this.rollback(session);
      throw error;
    }
    await this.commit(session);
    return result;
  }

  /** Resolves when nothing is waiting, running or uncommitted (before the connection closes). */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #isIdle(): boolean {
    return this.#waiting.length === 0 && this.#active === undefined && this.#group === undefined && !this.#busy;
  }

  #end(session: Session): void {
    session.unit = undefined;
    if (this.#active === session) this.#active = undefined;
    this.#advance();
  }

  /** Gives the writer to the next unit, or commits the group when it is full, old, or no unit waits. */
  #advance(): void {
    if (this.#active !== undefined || this.#busy || this.#yielding) return;
    const group = this.#group;
    const now = performance.now();
    if (group !== undefined && (group.units >= GROUP_UNITS || now - group.startedAt >= GROUP_WINDOW_MS)) {
      void this.#commitGroup();
      return;
    }
    if (this.#waiting.length === 0) {
      if (group !== undefined) this.#scheduleCommit();
      else this.#settleIdle();
      return;
    }
    if (group === undefined) {
      void this.#openGroup(this.#waiting.shift()!);
      return;
    }
    if (now - this.#sliceStartedAt >= SLICE_MS) {
      // The event loop is given back for a turn; the group stays open meanwhile.
      this.#yielding = true;
      setImmediate(() => {
        this.#yielding = false;
        this.#sliceStartedAt = performance.now();
        this.#advance();
      });
      return;
    }
    this.#startUnit(this.#waiting.shift()!);
  }

  #startUnit(next: Waiting): void {
    // One name for every unit: they run one at a time, each released before the next begins, and
    // one SQL text is prepared once (a name per unit would flood the statement cache).
    const savepoint = UNIT_SAVEPOINT;
    try {
      next.session.unit = { savepoint, done: false };
      next.session.own(`savepoint "${savepoint}"`);
    } catch (error) {
      next.session.unit = undefined;
      next.fail(error);
      this.#advance();
      return;
    }
    this.#group!.units++;
    this.#active = next.session;
    next.start();
  }

  async #openGroup(first: Waiting): Promise<void> {
    this.#busy = true;
    try {
      await whenUnlocked(() => execute(this.#options.writer.prepare('begin immediate')), this.#options.lockTimeoutMs);
    } catch (error) {
      // Nobody gets the lock in time: every unit waiting now is told (503), not only the first.
      this.#busy = false;
      for (const waiting of [first, ...this.#waiting.splice(0)]) waiting.fail(error);
      this.#settleIdle();
      return;
    }
    this.#busy = false;
    this.#group = { startedAt: performance.now(), units: 0, members: [] };
    this.#sliceStartedAt = this.#group.startedAt;
    this.#startUnit(first);
  }

  /**
   * With no unit waiting, the group commits after a turn of the event loop that brought no new
   * unit: while turns bring units (other requests read from their sockets), it waits for one more
   * turn, up to its window. Without load that costs one turn of an idle event loop, microseconds.
   */
  #scheduleCommit(): void {
    if (this.#commitScheduled) return;
    this.#commitScheduled = true;
    this.#arrived = false;
    setImmediate(() => {
      this.#commitScheduled = false;
      this.#sliceStartedAt = performance.now();
      if (this.#active !== undefined || this.#busy || this.#group === undefined || this.#waiting.length > 0) this.#advance();
      else if (this.#arrived && performance.now() - this.#group.startedAt < GROUP_WINDOW_MS) this.#scheduleCommit();
      else void this.#commitGroup();
    });
  }

  async #commitGroup(): Promise<void> {
    const group = this.#group!;
    this.#group = undefined;
    this.#busy = true;
    let failure: unknown;
    try {
      execute(this.#options.writer.prepare('commit'));
      this.#options.onWritten?.();
    } catch (error) {
      failure = error;
      if (isDiskFull(error)) this.#options.onDiskFull?.(error);
      if (this.#options.writer.inTransaction) execute(this.#options.writer.prepare('rollback'));
    }
    for (const member of group.members) {
      if (failure === undefined) member.resolve();
      else member.reject(failure);
    }
    // The next group opens on the next turn of the event loop, after the sockets that are ready
    // have been read and the answers of this group written: units never run back to back for
    // longer than a group's bound.
    setImmediate(() => {
      this.#busy = false;
      this.#advance();
    });
  }

  #settleIdle(): void {
    if (!this.#isIdle()) return;
    for (const resolve of this.#idle.splice(0)) resolve();
  }
}

/**
 * Runs `attempt`, again after a pause while it finds the database locked by another process
 * (SQLITE_BUSY), until the lock timeout; the pause does not hold up the event loop.
 */
async function whenUnlocked<T>(attempt: () => T, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error) || performance.now() + pause > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

function isBusy(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}
