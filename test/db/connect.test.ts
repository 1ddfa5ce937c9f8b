import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqlite, type Storage } from '../../src/db/connect.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';
import { tempFolder } from '../helpers/temp.js';

const opened: { storage: Storage; folder: string }[] = [];
afterEach(async () => {
  for (const { storage, folder } of opened.splice(0)) {
    await storage.close();
    rmSync(folder, { recursive: true, force: true });
  }
});

async function open(sqliteSynchronous: 'full' | 'normal') {
  const folder = tempFolder('db');
  const storage = await openSqlite({ data: join(folder, 'nested', 'rowi.db'), sqliteSynchronous });
  opened.push({ storage, folder });
  return storage;
}

async function pragma(storage: Storage, name: string): Promise<unknown> {
  const { rows } = await sql<Record<string, unknown>>`${sql.raw(`pragma ${name}`)}`.execute(storage.db);
  return Object.values(rows[0]!)[0];
}

describe('openSqlite', () => {
  it('openSqlite: WAL journal, synchronous FULL, foreign keys on, and no busy timeout (the driver waits for the lock off the event loop) by default', async () => {
    const storage = await open('full');
    expect(await pragma(storage, 'journal_mode')).toBe('wal');
    // 2 = FULL: a commit is on disk before it is acknowledged, so it survives a crash or power loss.
    expect(await pragma(storage, 'synchronous')).toBe(2);
    expect(await pragma(storage, 'foreign_keys')).toBe(1);
    // SQLite's own wait would sleep on the event loop (test/db/locked.test.ts).
    expect(await pragma(storage, 'busy_timeout')).toBe(0);
  });

  it("openSqlite: the writer runs no WAL checkpoint inside a COMMIT (a thread of its own checkpoints), keeps the log to 64 MiB once checkpointed, and its savepoints' journals in memory", async () => {
    const storage = await open('full');
    // Inside a transaction, queries run on the writer.
    const [autocheckpoint, sizeLimit, tempStore] = await storage.db
      .transaction()
      .execute(async (trx) => [
        Object.values((await sql<Record<string, unknown>>`pragma wal_autocheckpoint`.execute(trx)).rows[0]!)[0],
        Object.values((await sql<Record<string, unknown>>`pragma journal_size_limit`.execute(trx)).rows[0]!)[0],
        Object.values((await sql<Record<string, unknown>>`pragma temp_store`.execute(trx)).rows[0]!)[0],
      ]);
    expect(autocheckpoint).toBe(0);
    expect(sizeLimit).toBe(64 * 1024 * 1024);
    // 2 = MEMORY: an order's savepoint journal outgrows SQLite's 64 KiB in memory, and a file costs a write and a read a unit.
    expect(tempStore).toBe(2);
  });

  it('openSqlite: synchronous NORMAL (1) when ROWI_SQLITE_SYNCHRONOUS=normal', async () => {
    expect(await pragma(await open('normal'), 'synchronous')).toBe(1);
  });

  it('openSqlite: a transaction holds the write lock from BEGIN (BEGIN IMMEDIATE), before its first write', async () => {
    const folder = tempFolder('db');
    const file = join(folder, 'rowi.db');
    const storage = await openSqlite({ data: file, sqliteSynchronous: 'full' });
    opened.push({ storage, folder });
    await sql`create table t (v integer)`.execute(storage.db);
    const other = await openSqliteFile(file, { busyTimeoutMs: 0 });
    try {
      await storage.db.transaction().execute(async (trx) => {
        await sql`select count(*) from t`.execute(trx);
        // Under a deferred BEGIN this would succeed: the first transaction has only read so far.
        expect(() => other.exec('begin immediate')).toThrow(/database is locked/);
      });
      other.exec('begin immediate');
      other.exec('rollback');
    } finally {
      other.close();
    }
  });
});
