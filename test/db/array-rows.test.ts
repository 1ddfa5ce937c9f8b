import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withArrayRows } from '../../src/db/array-rows.js';
import { compiledQuery } from '../../src/db/compiled.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { createUser } from '../helpers/records.js';

/** Rows as arrays (db/array-rows.ts), on SQLite and on PostgreSQL alike. */
let test: TestApp;
let users: { id: number; name: string; email: string }[];

beforeAll(async () => {
  test = await startApp();
  users = [(await createUser(test)).user, (await createUser(test)).user];
});
afterAll(() => test.close());

describe('rows as arrays', () => {
  it('a query withArrayRows answers each row as the values of its columns, in the order selected; the same query without it, objects', async () => {
    const { db } = test.storage;
    const query = db
      .selectFrom('users')
      .select(['email', 'id', 'name'])
      .where(
        'id',
        'in',
        users.map((user) => user.id),
      )
      .orderBy('id');
    expect(await withArrayRows(query).execute()).toEqual(users.map((user) => [user.email, user.id, user.name]));
    expect(await query.execute()).toEqual(users.map((user) => ({ email: user.email, id: user.id, name: user.name })));
    // Run again, prepared (both drivers keep statements by text): still each as it asked.
    expect(await withArrayRows(query).execute()).toEqual(users.map((user) => [user.email, user.id, user.name]));
    expect(await query.execute()).toEqual(users.map((user) => ({ email: user.email, id: user.id, name: user.name })));
  });

  it('a compiled query withArrayRows answers arrays every time it runs', async () => {
    const byId = compiledQuery((db, id: number) =>
      withArrayRows(db.selectFrom('users').select(['id', 'name']).where('id', '=', id)),
    );
    for (const user of users) expect(await byId(test.storage.db, user.id)).toEqual([[user.id, user.name]]);
  });
});
