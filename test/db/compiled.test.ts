import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledPerCount, compiledQuery, rowsOf } from '../../src/db/compiled.js';
import { openSqlite, type Storage } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { tempFolder } from '../helpers/temp.js';

let storage: Storage;
let folder: string;

beforeAll(async () => {
  folder = tempFolder('compiled');
  storage = await openSqlite({ data: join(folder, 'rowi.db'), sqliteSynchronous: 'full' });
  await migrateToLatest(storage.db);
  const stamp = '2026-01-01T00:00:00.000Z';
  await storage.db
    .insertInto('users')
    .values(
      ['ada', 'bob', 'cy'].map((name) => ({
        name,
        email: `${name}@example.com`,
        email_key: `${name}@example.com`,
        created_at: stamp,
        updated_at: stamp,
        version: 1,
      })),
    )
    .execute();
});

afterAll(async () => {
  await storage.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('compiledQuery', () => {
  const byNameAndEmail = compiledQuery((db, email: string, name: string) =>
    db.selectFrom('users').select(['id', 'name']).where('name', '=', name).where('email', '=', email),
  );

  it('compiledQuery: each call runs with its own parameters, placed by position, not by call order', async () => {
    expect(await byNameAndEmail(storage.db, 'ada@example.com', 'ada')).toEqual([{ id: 1, name: 'ada' }]);
    expect(await byNameAndEmail(storage.db, 'bob@example.com', 'bob')).toEqual([{ id: 2, name: 'bob' }]);
    expect(await byNameAndEmail(storage.db, 'bob@example.com', 'ada')).toEqual([]);
  });

  it('compiledQuery: runs inside a transaction and sees its uncommitted writes', async () => {
    await storage.db
      .transaction()
      .execute(async (trx) => {
        await trx.updateTable('users').set({ name: 'cyrus' }).where('id', '=', 3).execute();
        expect(await byNameAndEmail(trx, 'cy@example.com', 'cyrus')).toEqual([{ id: 3, name: 'cyrus' }]);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect(await byNameAndEmail(storage.db, 'cy@example.com', 'cy')).toEqual([{ id: 3, name: 'cy' }]);
  });

  it('compiledQuery: a parameter used twice is placed in both spots', async () => {
    const twice = compiledQuery((db, id: number) =>
      db.selectFrom('users').select('id').where('id', '=', id).where('version', '=', id),
    );
    expect(await twice(storage.db, 1)).toEqual([{ id: 1 }]);
    expect(await twice(storage.db, 2)).toEqual([]);
  });

  it('compiledQuery: a parameter that is not used as a value is refused, not silently ignored', async () => {
    const unused = compiledQuery((db, _id: number) => db.selectFrom('users').select('id').where('id', '=', 1));
    await expect(unused(storage.db, 1)).rejects.toThrow(/every parameter must be used/);
  });
});

describe('compiledPerCount', () => {
  /** Users by id, an IN list of `count` ids, recording each time the query is built. */
  function usersById() {
    const builtFor: number[] = [];
    const query = compiledPerCount(2, (db, count, ...ids) => {
      builtFor.push(count);
      return db
        .selectFrom('users')
        .select(['id', 'name'])
        .where('id', 'in', ids as number[])
        .orderBy('id');
    });
    return { query, builtFor };
  }

  it('compiledPerCount: built once per count up to the bound, each call with its own values', async () => {
    const { query, builtFor } = usersById();
    expect(await query(storage.db, 1, 1)).toEqual([{ id: 1, name: 'ada' }]);
    expect(await query(storage.db, 1, 2)).toEqual([{ id: 2, name: 'bob' }]);
    expect(await query(storage.db, 2, 1, 2)).toEqual([
      { id: 1, name: 'ada' },
      { id: 2, name: 'bob' },
    ]);
    expect(await query(storage.db, 2, 2, 3)).toEqual([
      { id: 2, name: 'bob' },
      { id: 3, name: 'cy' },
    ]);
    expect(builtFor).toEqual([1, 2]);
  });

  it('compiledPerCount: beyond the bound, built for every call (the cache stays bounded) and still right', async () => {
    const { query, builtFor } = usersById();
    expect(await query(storage.db, 3, 1, 2, 3)).toHaveLength(3);
    expect(await query(storage.db, 3, 3, 2, 1)).toHaveLength(3);
    expect(builtFor).toEqual([3, 3]);
  });

  it('compiledPerCount with rowsOf: a multi-row insert compiled once per row count writes every row with its own values', async () => {
    const insert = compiledPerCount(4, (db, _count, ...values) =>
      db.insertInto('users').values(
        rowsOf<{
          name: string;
          email: string;
          email_key: string;
          created_at: string;
          updated_at: string;
          version: number;
        }>(values, ['name', 'email', 'email_key', 'created_at', 'updated_at', 'version']),
      ),
    );
    const stamp = '2026-02-02T00:00:00.000Z';
    const row = (name: string) => [name, `${name}@example.org`, `${name}@example.org`, stamp, stamp, 7];
    await insert(storage.db, 2, ...row('dee'), ...row('eve'));
    await insert(storage.db, 2, ...row('fay'), ...row('gus'));
    const stored = await storage.db
      .selectFrom('users')
      .select(['name', 'email', 'version'])
      .where('version', '=', 7)
      .orderBy('name')
      .execute();
    expect(stored).toEqual(
      ['dee', 'eve', 'fay', 'gus'].map((name) => ({ name, email: `${name}@example.org`, version: 7 })),
    );
  });
});
