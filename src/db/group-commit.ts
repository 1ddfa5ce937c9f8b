import { isDiskFull } from './driver-errors.js';
import { execute, type SqliteConnectionHandle } from './sqlite-connection.js';
import { othersWaitForWriteLock, whenUnlocked, writeLockReleased } from './sqlite-lock.js';

/**
 * Group commit on SQLite (the writer of sqlite-driver.ts): the units of work of concurrent
 * requests share one SQLite transaction and one fsync.
 *
 * - The writer opens one SQLite transaction for a group of units, runs them one after another,
 *   each but the first in a SAVEPOINT of its own (a unit that fails rolls back only itself; the
 *   first rolls back the transaction, which holds nothing else yet), and commits the group once. A unit's commit resolves only after the COMMIT of its group, so a 2xx still
 *   means "on disk" under synchronous=FULL. A group stays open while turns of the event loop
 *   bring new units (#scheduleCommit), up to GROUP_UNITS units or GROUP_WINDOW_MS.
 * - The group's BEGIN IMMEDIATE takes SQLite's write lock at once (two processes on one file
 *   never deadlock upgrading a shared lock); while another process holds it, the writer waits
 *   off the event loop (sqlite-lock.ts), and past `lockTimeoutMs` every unit waiting gets 503.
 * - ROLLBACK is sent only while a transaction is open: SQLite ends one by itself on some errors
 *   (a full disk at COMMIT), and a failing ROLLBACK would hide the real error.
 * - A unit that need not be on disk when it resolves (unit-of-work.ts, `flush: 'later'`: the audit
 *   trail's batches) says so as it enters. A group it opens is committed without the fsync
 *   (synchronous=NORMAL, which SQLite lets change only between transactions, so set as a group
 *   opens) and takes only such units: one that waits for the disk commits it first, and opens
 *   the next group under FULL again; its fsync (or a checkpoint's) writes the earlier frames
 *   through with its own. Such a unit joins any open group.
 */
export interface WriterOptions {
  writer: SqliteConnectionHandle;
  lockTimeoutMs: number;
  /**
   * How long a group may stay open, in ms (GROUP_WINDOW_MS unless given). The tests of which units
   * share a group give a long one, so that a loaded machine's pauses do not split their groups.
   */
  windowMs?: number;
  /** So that the log names a full disk once, and says when writes succeed again. */
  onDiskFull?: (error: unknown) => void;
  onWritten?: () => void;
  /** The writer's synchronous mode: under FULL, a group of units that may flush later commits under NORMAL. */
  synchronous?: 'full' | 'normal';
}

/** What the writer needs of a unit's session: where its turn is kept, and its own statements (savepoints). */
export interface UnitSession {
  /**
   * Set while the writer runs this session's unit: its savepoint, or none for the first unit of a
   * group (the transaction itself is its rollback).
   */
  unit: { savepoint: string | undefined; done: boolean } | undefined;
  own(sql: string): void;
}

/**
 * Units a group takes at most, and how long it may stay open. Each COMMIT waits for the disk (an
 * fsync under synchronous=FULL: about 1.4 ms here) on the event loop, so the more units share it
 * the less each pays; a unit waits at most the window for its COMMIT.
 */
const GROUP_UNITS = 128;
const GROUP_WINDOW_MS = 12;
/** How long units may run back to back on the event loop before it is given back for a turn. */
const SLICE_MS = 4;

/** A unit waiting for the writer, and what to tell it. */
interface Waiting {
  session: UnitSession;
  flushLater: boolean;
  start: () => void;
  fail: (error: unknown) => void;
}

/** What the units of the open group wait for: its COMMIT. */
interface Group {
  startedAt: number;
  units: number;
  /** Committed without the fsync: opened by a unit that may flush later, it takes only such units. */
  later: boolean;
  members: { resolve: () => void; reject: (error: unknown) => void }[];
}

export class GroupCommitWriter {
  readonly #options: WriterOptions;
  readonly #waiting: Waiting[] = [];
  #group: Group | undefined;
  /** The session whose unit runs now. */
  #active: UnitSession | undefined;
  /** True while the writer is opening a group or committing one (possibly waiting for the lock). */
  #busy = false;
  #commitScheduled = false;
  #yielding = false;
  /** When units began to run back to back (the group opened, or the event loop was last given back). */
  #sliceStartedAt = 0;
  /** Whether a unit has asked to enter since the writer last looked (a turn of the event loop that brought work). */
  #arrived = false;
  #idle: (() => void)[] = [];
  /** The writer connection's synchronous mode now (under FULL, NORMAL after a group without the fsync). */
  #mode: 'normal' | 'full' = 'full';

  readonly #windowMs: number;

  constructor(options: WriterOptions) {
    this.#options = options;
    this.#windowMs = options.windowMs ?? GROUP_WINDOW_MS;
  }

  /** Resolves when it is the session's turn: a group is open and, unless the unit is its first, a savepoint taken for it. */
  enter(session: UnitSession, flushLater = false): Promise<void> {
    return new Promise((start, fail) => {
      this.#waiting.push({ session, flushLater, start, fail });
      this.#arrived = true;
      this.#advance();
    });
  }

  /** Ends the session's unit (RELEASE) and resolves once its group has committed. */
  commit(session: UnitSession): Promise<void> {
    const unit = session.unit!;
    unit.done = true;
    const committed = new Promise<void>((resolve, reject) => this.#group!.members.push({ resolve, reject }));
    try {
      if (unit.savepoint !== undefined) session.own(`release savepoint "${unit.savepoint}"`);
    } catch (error) {
      this.#group!.members.pop();
      this.#end(session);
      return Promise.reject(error);
    }
    this.#end(session);
    return committed;
  }

  /**
   * Undoes the session's unit (ROLLBACK TO its savepoint); the rest of the group goes on. The first
   * unit of a group has no savepoint: the group's transaction, which holds nothing else yet, is
   * rolled back, and the next unit opens a group of its own.
   */
  rollback(session: UnitSession): void {
    const unit = session.unit;
    // After a failed commit (the group's COMMIT) there is nothing of this unit left to undo.
    if (unit === undefined || unit.done) return;
    unit.done = true;
    if (unit.savepoint === undefined) {
      this.#group = undefined;
      if (this.#options.writer.inTransaction) session.own('rollback');
      writeLockReleased();
    } else if (this.#options.writer.inTransaction) {
      session.own(`rollback to savepoint "${unit.savepoint}"`);
      session.own(`release savepoint "${unit.savepoint}"`);
    }
    this.#end(session);
  }

  /** Resolves when nothing is waiting, running or uncommitted (before the connection closes). */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #isIdle(): boolean {
    return this.#waiting.length === 0 && this.#active === undefined && this.#group === undefined && !this.#busy;
  }

  #end(session: UnitSession): void {
    session.unit = undefined;
    if (this.#active === session) this.#active = undefined;
    this.#advance();
  }

  /** Gives the writer to the next unit, or commits the group when it is full, old, or no unit waits. */
  #advance(): void {
    if (this.#active !== undefined || this.#busy || this.#yielding) return;
    const group = this.#group;
    const now = performance.now();
    if (
      group !== undefined &&
      (group.units >= GROUP_UNITS ||
        now - group.startedAt >= this.#windowMs ||
        othersWaitForWriteLock() ||
        (group.later && this.#waiting.length > 0 && !this.#waiting[0]!.flushLater))
    ) {
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
    // one SQL text is prepared once (a name per unit would flood the statement cache). The first
    // unit of a group takes none: under a savepoint SQLite copies every page a unit changes to a
    // statement journal first, which for an import's chunk is thousands (bench/NOTES.md "Imports").
    const savepoint = this.#group!.units === 0 ? undefined : 'unit';
    try {
      next.session.unit = { savepoint, done: false };
      if (savepoint !== undefined) next.session.own(`savepoint "${savepoint}"`);
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
    const later = first.flushLater && this.#options.synchronous === 'full';
    try {
      // SQLite lets it change only between transactions: set for each group as it opens.
      if (this.#options.synchronous === 'full') this.#synchronous(later ? 'normal' : 'full');
      await whenUnlocked(() => execute(this.#options.writer.prepare('begin immediate')), this.#options.lockTimeoutMs);
    } catch (error) {
      // Nobody gets the lock in time: every unit waiting now is told (503), not only the first.
      this.#busy = false;
      for (const waiting of [first, ...this.#waiting.splice(0)]) waiting.fail(error);
      this.#settleIdle();
      return;
    }
    this.#busy = false;
    this.#group = { startedAt: performance.now(), units: 0, later, members: [] };
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
      if (this.#active !== undefined || this.#busy || this.#group === undefined || this.#waiting.length > 0)
        this.#advance();
      else if (this.#arrived && !othersWaitForWriteLock() && performance.now() - this.#group.startedAt < this.#windowMs)
        this.#scheduleCommit();
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
    writeLockReleased();
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

  /** The writer's synchronous mode, changed when the group opening needs the other. */
  #synchronous(mode: 'normal' | 'full'): void {
    if (mode === this.#mode) return;
    execute(this.#options.writer.prepare(`pragma synchronous = ${mode}`));
    this.#mode = mode;
  }

  #settleIdle(): void {
    if (!this.#isIdle()) return;
    for (const resolve of this.#idle.splice(0)) resolve();
  }
}
