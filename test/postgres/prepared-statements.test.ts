import { sql } from 'kysely';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { migrateStorage } from '../../src/db/migrate.js';
import { MAX_PREPARED_STATEMENTS } from '../../src/db/prepared-statements.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * rowi's statements on PostgreSQL are prepared once per connection (parsed under a name, then only
 * bound and executed), for at most MAX_PREPARED_STATEMENTS texts; seen from PostgreSQL's own view
 * of the session's prepared statements, on a pool of one connection.
 */

const storages: Storage[] = [];
const databases: TestDatabase[] = [];

afterEach(async () => {
  for (const storage of storages.splice(0)) await storage.close();
  for (const database of databases.splice(0)) await database.drop();
});

async function open(): Promise<Storage> {
  const database = await createTestDatabase('postgres');
  databases.push(database);
  const config = loadConfig({
    ROWI_DATABASE_URL: database.env.ROWI_DATABASE_URL!,
    ROWI_DATABASE_POOL_SIZE: '1',
    ROWI_LOG_LEVEL: 'silent',
  });
  const storage = await openStorage(config, pino({ level: 'silent' }));
  storages.push(storage);
  await migrateStorage(storage);
  return storage;
}

/** The statements prepared on the pool's one connection, by text. */
async function prepared(storage: Storage): Promise<Map<string, string>> {
  const { rows } = await sql<{
    name: string;
    statement: string;
  }>`select name, statement from pg_prepared_statements`.execute(storage.db);
  return new Map(rows.map((row) => [row.statement, row.name]));
}

describe('prepared statements on PostgreSQL', () => {
  it('a statement run twice is prepared once, under a name, and answers alike both times', async () => {
    const storage = await open();
    const insert = () =>
      storage.db
        .insertInto('items')
        .values({
          name: 'Lamp',
          sku: 'LAMP-1',
          price: 1999,
          version: 1,
          created_at: '2026-01-01T00:00:00.000Z',
          updated_at: '2026-01-01T00:00:00.000Z',
        })
        .returning('id')
        .executeTakeFirstOrThrow();
    await insert();
    const read = () => storage.db.selectFrom('items').select(['name', 'price']).where('sku', '=', 'LAMP-1').execute();
    expect(await read()).toEqual([{ name: 'Lamp', price: 1999 }]);
    expect(await read()).toEqual([{ name: 'Lamp', price: 1999 }]);
    const statements = await prepared(storage);
    const text = [...statements.keys()].filter((statement) =>
      statement.startsWith('select "name", "price" from "items"'),
    );
    expect(text).toHaveLength(1);
    expect(statements.get(text[0]!)).toMatch(/^rowi_\d+$/);
  });

  it('a failing prepared statement fails as before (a unique violation, SQLSTATE 23505), and the connection goes on', async () => {
    const storage = await open();
    const insert = (sku: string) =>
      storage.db
        .insertInto('items')
        .values({
          name: 'Lamp',
          sku,
          price: 1,
          version: 1,
          created_at: '2026-01-01T00:00:00.000Z',
          updated_at: '2026-01-01T00:00:00.000Z',
        })
        .execute();
    await insert('A-1');
    await expect(insert('A-1')).rejects.toMatchObject({ code: '23505' });
    await insert('A-2');
    const { rows } = await sql<{ count: number }>`select count(*)::int as count from items`.execute(storage.db);
    expect(rows[0]!.count).toBe(2);
  });

  it(`beyond ${MAX_PREPARED_STATEMENTS} distinct texts, statements run unprepared: every answer right, no more than ${MAX_PREPARED_STATEMENTS} prepared`, async () => {
    const storage = await open();
    const count = MAX_PREPARED_STATEMENTS + 40;
    for (let index = 0; index < count; index++) {
      // sql.lit puts the number in the text: a distinct statement each time.
      const { rows } = await sql<{ n: number }>`select ${sql.lit(index)}::int + ${1}::int as n`.execute(storage.db);
      expect(rows[0]!.n).toBe(index + 1);
    }
    const statements = await prepared(storage);
    expect(statements.size).toBe(MAX_PREPARED_STATEMENTS);
    // The first texts have names; the last ones ran unprepared.
    expect([...statements.keys()].some((statement) => statement.startsWith(`select ${count - 1}::int`))).toBe(false);
  });
});
