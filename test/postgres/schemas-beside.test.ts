import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { migrateStorage } from '../../src/db/migrate.js';
import { adminQuery, createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Instances of rowi, each in a schema of its own on one PostgreSQL database: one starts (migrates)
 * while another schema beside it is created and dropped. Its start looks at its own schema only,
 * so what happens beside it does not fail it.
 */

const storages: Storage[] = [];
const databases: TestDatabase[] = [];

afterEach(async () => {
  for (const storage of storages.splice(0)) await storage.close();
  for (const database of databases.splice(0)) await database.drop();
});

async function migrateFresh(): Promise<string[]> {
  const database = await createTestDatabase('postgres');
  databases.push(database);
  const config = loadConfig({ ROWI_DATABASE_URL: database.env.ROWI_DATABASE_URL!, ROWI_LOG_LEVEL: 'silent' });
  const storage = await openStorage(config, pino({ level: 'silent' }));
  storages.push(storage);
  return (await migrateStorage(storage)).applied;
}

describe('a start beside other schemas of the same database', () => {
  it('migrates its own schema while another schema with tables is dropped and made again all along', async () => {
    let churning = true;
    let dropped = 0;
    const churn = (async () => {
      while (churning) {
        const other = await createTestDatabase('postgres');
        await adminQuery(`create table ${other.schema!}.filler (id int primary key, note text)`);
        await other.drop();
        dropped += 1;
      }
    })();
    try {
      for (let start = 0; start < 6; start++) {
        const applied = await migrateFresh();
        expect(applied.length).toBeGreaterThan(10);
      }
    } finally {
      churning = false;
      await churn;
    }
    expect(dropped).toBeGreaterThan(5);
  });
});
