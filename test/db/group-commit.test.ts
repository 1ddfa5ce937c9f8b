import { join } from 'node:path';
import { Kysely, sql, type Generated } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteConnection, type SqliteConnectionHandle } from '../../src/db/sqlite-connection.js';
import { RowiSqliteDialect } from '../../src/db/sqlite-driver.js';
import { FLUSH_LATER } from '../../src/db/unit-of-work.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Group commit, on a real SQLite file, with every statement of the writer connection recorded:
 * concurrent transactions (units of work) share one BEGIN and one COMMIT, each but the group's
 * first in a savepoint of its own; a unit that fails rolls back only itself (the first: the
 * transaction, which holds nothing else yet); none is acknowledged before the COMMIT that
 * holds it; a COMMIT that fails fails every unit of its group, and nothing of them is stored.
 */
interface Table {
  id: Generated<number>;
  v: string;
}

let writer: SqliteConnectionHandle;
let reader: SqliteConnectionHandle;
let db: Kysely<{ t: Table }>;
let log: string[];
/** When set, the next COMMIT throws this instead of committing. */
let failCommit: Error | undefined;

beforeEach(async () => {
  const file = join(tempFolder('group-commit'), 'g.db');
  const real = await openSqliteConnection(file, { synchronous: 'full', busyTimeoutMs: 0 });
  log = [];
  failCommit = undefined;
  writer = {
    prepare(text) {
      const statement = real.prepare(text);
      return {
        reader: statement.reader,
        all: (parameters) => {
          log.push(text);
          return statement.all(parameters);
        },
        run: (parameters) => {
          log.push(text);
          if (text === 'commit' && failCommit !== undefined) {
            const error = failCommit;
            failCommit = undefined;
            real.prepare('rollback').run();
            throw error;
          }
          return statement.run(parameters);
        },
      };
    },
    get inTransaction() {
      return real.inTransaction;
    },
    close: () => real.close(),
  };
  reader = await openSqliteConnection(file, { synchronous: 'full', busyTimeoutMs: 0 });
  // A group's window of a minute: these tests check which units share a group, and a loaded
  // machine's pauses would close the real 12 ms window between them. The window's own test
  // opens the database again with it.
  db = openDb(60_000);
  await sql`create table t (id integer primary key, v text not null)`.execute(db);
  log.length = 0;
});
afterEach(() => db.destroy());

function openDb(windowMs?: number): Kysely<{ t: Table }> {
  return new Kysely<{ t: Table }>({
    dialect: new RowiSqliteDialect({
      writer,
      reader,
      lockTimeoutMs: 1000,
      synchronous: 'full',
      ...(windowMs === undefined ? {} : { windowMs }),
    }),
  });
}

const insert = (v: string) => db.transaction().execute((trx) => trx.insertInto('t').values({ v }).execute());
/** A unit of work that need not be on disk when it resolves (unit-of-work.ts, `flush: 'later'`). */
const insertFlushedLater = (v: string) =>
  db.transaction().execute(async (trx) => {
    await sql.raw(FLUSH_LATER).execute(trx);
    await trx.insertInto('t').values({ v }).execute();
  });
const stored = async () => (await db.selectFrom('t').select('v').orderBy('id').execute()).map((row) => row.v);

describe('group commit (SQLite)', () => {
  it('20 concurrent transactions: one BEGIN IMMEDIATE and one COMMIT, each transaction but the first in its own savepoint, all stored', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, index) => insert(`v${index}`)));
    expect(log.filter((text) => text === 'begin immediate')).toHaveLength(1);
    expect(log.filter((text) => text === 'commit')).toHaveLength(1);
    expect(log.filter((text) => text === 'savepoint "unit"')).toHaveLength(19);
    expect(log.filter((text) => text === 'release savepoint "unit"')).toHaveLength(19);
    expect((await stored()).sort()).toEqual(Array.from({ length: 20 }, (_, index) => `v${index}`).sort());
  });

  it('transactions that arrive on successive turns of the event loop join the open group; a turn that brings none commits it', async () => {
    // Five transactions, each started on the next turn (as requests read from their sockets one turn after another).
    const turns: Promise<unknown>[] = [];
    for (let turn = 0; turn < 5; turn++) {
      turns.push(insert(`turn${turn}`));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(turns);
    expect(log.filter((text) => text === 'begin immediate')).toHaveLength(1);
    expect(log.filter((text) => text === 'commit')).toHaveLength(1);
    // Then nothing arrives for a while: the next transaction is a group of its own, committed without waiting for more.
    await new Promise((resolve) => setTimeout(resolve, 30));
    await insert('alone');
    expect(log.filter((text) => text === 'commit')).toHaveLength(2);
    expect((await stored()).sort()).toEqual(['alone', 'turn0', 'turn1', 'turn2', 'turn3', 'turn4']);
  });

  it('a group stays open at most its window: while every turn brings a transaction, groups are still committed, each acknowledged', async () => {
    // Every turn brings a unit and takes at least 1 ms, so a 12 ms window closes a group after about
    // a dozen units; without the window the open group would take units up to its cap of 128. The
    // loop runs until three groups have committed, bounded in count and time: it counts groups and
    // units, not turns per millisecond, which a loaded machine does not give.
    db = openDb();
    const started = performance.now();
    const all: Promise<unknown>[] = [];
    const commits = () => log.filter((text) => text === 'commit').length;
    let unitsBeforeFirstCommit: number | undefined;
    while (commits() < 3 && all.length < 2_000 && performance.now() - started < 10_000) {
      all.push(insert(`w${all.length}`));
      const turn = performance.now();
      while (performance.now() - turn < 1);
      await new Promise((resolve) => setImmediate(resolve));
      if (unitsBeforeFirstCommit === undefined && commits() > 0) unitsBeforeFirstCommit = all.length;
    }
    const committedWhileArriving = commits();
    await Promise.all(all);
    expect(committedWhileArriving).toBeGreaterThanOrEqual(3);
    expect(committedWhileArriving).toBeLessThan(all.length);
    expect(unitsBeforeFirstCommit).toBeLessThan(100);
    expect(await stored()).toHaveLength(all.length);
  });

  it('a transaction that fails rolls back only its own work; the others of its group commit', async () => {
    const outcomes = await Promise.allSettled([
      insert('first'),
      db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ v: 'doomed' }).execute();
        throw new Error('refused');
      }),
      insert('third'),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(log).toContain('rollback to savepoint "unit"');
    expect(log.filter((text) => text === 'commit')).toHaveLength(1);
    expect(await stored()).toEqual(['first', 'third']);
  });

  it('when the first transaction of a group fails, its group is rolled back whole and the next ones commit in a group of their own', async () => {
    const outcomes = await Promise.allSettled([
      db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ v: 'doomed' }).execute();
        throw new Error('refused');
      }),
      insert('second'),
      insert('third'),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect(log.slice(0, 3)).toEqual(['begin immediate', 'insert into "t" ("v") values (?)', 'rollback']);
    expect(log.filter((text) => text === 'begin immediate')).toHaveLength(2);
    expect(log.filter((text) => text === 'commit')).toHaveLength(1);
    expect(await stored()).toEqual(['second', 'third']);
    await insert('after');
    expect(await stored()).toEqual(['second', 'third', 'after']);
  });

  it('no transaction is acknowledged before the COMMIT of its group has run', async () => {
    const acknowledged: number[] = [];
    await Promise.all(
      Array.from({ length: 5 }, (_, index) =>
        insert(`a${index}`).then(() => {
          acknowledged.push(log.lastIndexOf('commit'));
        }),
      ),
    );
    // Each saw a COMMIT already in the log when its promise resolved.
    expect(acknowledged.every((at) => at !== -1)).toBe(true);
  });

  it('a COMMIT that fails (a full disk) fails every transaction of its group, and nothing of them is stored', async () => {
    await insert('before');
    failCommit = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const outcomes = await Promise.allSettled(Array.from({ length: 4 }, (_, index) => insert(`lost${index}`)));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    expect((outcomes[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_FULL' });
    expect(await stored()).toEqual(['before']);
    // And the writer goes on.
    await insert('after');
    expect(await stored()).toEqual(['before', 'after']);
  });

  it('reads outside a transaction run on the reader and never see a group before it commits', async () => {
    let seenDuringUnit: string[] | undefined;
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ v: 'uncommitted' }).execute();
      seenDuringUnit = await stored();
    });
    expect(seenDuringUnit).toEqual([]);
    expect(await stored()).toEqual(['uncommitted']);
    expect(log.some((text) => text.startsWith('select'))).toBe(false);
  });

  it('a write outside a transaction becomes a unit of its own, committed before it resolves', async () => {
    await db.insertInto('t').values({ v: 'alone' }).execute();
    expect(log).toEqual(['begin immediate', 'insert into "t" ("v") values (?)', 'commit']);
    expect(await stored()).toEqual(['alone']);
  });

  it('a group opened by units that may flush later commits without the fsync (synchronous NORMAL), the next that flushes under FULL again', async () => {
    await Promise.all([insertFlushedLater('a'), insertFlushedLater('b')]);
    expect(log.filter((text) => !text.startsWith('insert') && !text.includes('savepoint'))).toEqual([
      'pragma synchronous = normal',
      'begin immediate',
      'commit',
    ]);
    expect(await stored()).toEqual(['a', 'b']);
    // The next write is on disk when it resolves, and the ones before it with it.
    log.length = 0;
    await insert('c');
    expect(log).toEqual(['pragma synchronous = full', 'begin immediate', 'insert into "t" ("v") values (?)', 'commit']);
    expect((await sql<{ synchronous: number }>`pragma synchronous`.execute(db)).rows).toEqual([{ synchronous: 2 }]);
  });

  it('a unit that waits for the disk never shares a group without the fsync: it commits that one first and opens its own, which the others may join', async () => {
    // The first unit holds its group open until the others wait behind it.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = db.transaction().execute(async (trx) => {
      await sql.raw(FLUSH_LATER).execute(trx);
      await trx.insertInto('t').values({ v: 'later' }).execute();
      await held;
    });
    for (let turn = 0; turn < 1000 && !log.includes('begin immediate'); turn++)
      await new Promise((resolve) => setImmediate(resolve));
    const others = [insert('now'), insertFlushedLater('later too')];
    await new Promise((resolve) => setImmediate(resolve));
    release();
    await Promise.all([first, ...others]);
    expect(log.filter((text) => !text.startsWith('insert'))).toEqual([
      'pragma synchronous = normal',
      'begin immediate',
      'commit',
      'pragma synchronous = full',
      'begin immediate',
      'savepoint "unit"',
      'release savepoint "unit"',
      'commit',
    ]);
    expect((await stored()).sort()).toEqual(['later', 'later too', 'now']);
  });

  it('a unit that may flush later and fails first in its group: nothing stored, and the next group flushes again', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await sql.raw(FLUSH_LATER).execute(trx);
        await trx.insertInto('t').values({ v: 'doomed' }).execute();
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(log.filter((text) => !text.startsWith('insert'))).toEqual([
      'pragma synchronous = normal',
      'begin immediate',
      'rollback',
    ]);
    expect(await stored()).toEqual([]);
    log.length = 0;
    await insert('after');
    expect(log[0]).toBe('pragma synchronous = full');
  });

  it('a transaction that runs no statement takes no turn of the writer', async () => {
    await db.transaction().execute(async () => 'nothing');
    expect(log).toEqual([]);
  });
});
