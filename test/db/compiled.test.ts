import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledQuery } from '../../src/db/compiled.js';
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
    const twice = compiledQuery((db, id: number) => db.selectFrom('users').select('id').where('id', '=', id).where('version', '=', id));
    expect(await twice(storage.db, 1)).toEqual([{ id: 1 }]);
    expect(await twice(storage.db, 2)).toEqual([]);
  });

  it('compiledQuery: a parameter that is not used as a value is refused, not silently ignored', async () => {
    const unused = compiledQuery((db, _id: number) => db.selectFrom('users').select('id').where('id', '=', 1));
    await expect(unused(storage.db, 1)).rejects.toThrow(/every parameter must be used/);
  });
});
