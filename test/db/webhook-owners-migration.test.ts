import { Migrator, sql, type Migration } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { isSqlite } from '../../src/db/dialect.js';
import { migrateStorage } from '../../src/db/migrate.js';
import * as m0001 from '../../src/db/migrations/0001-users.js';
import * as m0002 from '../../src/db/migrations/0002-inventory-orders.js';
import * as m0003 from '../../src/db/migrations/0003-callers-audit.js';
import * as m0004 from '../../src/db/migrations/0004-caller-rate-limit.js';
import * as m0005 from '../../src/db/migrations/0005-weather.js';
import * as m0006 from '../../src/db/migrations/0006-events.js';
import * as m0007 from '../../src/db/migrations/0007-delivery-claims.js';
import { createTestDatabase } from '../helpers/database.js';

/** The migrations before webhook endpoints had owners. */
const BEFORE_OWNERS: Record<string, Migration> = {
  '0001-users': m0001,
  '0002-inventory-orders': m0002,
  '0003-callers-audit': m0003,
  '0004-caller-rate-limit': m0004,
  '0005-weather': m0005,
  '0006-events': m0006,
  '0007-delivery-claims': m0007,
};

let storage: Storage;
let drop: () => Promise<void>;
beforeAll(async () => {
  const database = await createTestDatabase();
  drop = database.drop;
  storage = await openStorage(loadConfig({ ...database.env, ROWI_LOG_LEVEL: 'silent' }), pino({ level: 'silent' }));
});
afterAll(async () => {
  await storage.close();
  await drop();
});

async function migrateBeforeOwners(): Promise<void> {
  await storage.unbounded(async (db) => {
    const schema = isSqlite(db)
      ? undefined
      : (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]!.schema;
    const { error } = await new Migrator({
      db,
      provider: { getMigrations: async () => BEFORE_OWNERS },
      ...(schema ? { migrationTableSchema: schema } : {}),
    }).migrateToLatest();
    if (error) throw error;
  });
}

describe('migration 0008: webhook endpoints get owners', () => {
  it('endpoints made before owners go to the first admin caller, and their URLs are stored as rowi calls them; nothing else changes', async () => {
    await migrateBeforeOwners();
    const db = storage.db;
    const now = new Date().toISOString();
    const caller = (role: 'reader' | 'admin', name: string) =>
      db
        .insertInto('callers')
        .values({
          name,
          role,
          extra_scopes: '',
          removed_scopes: '',
          rate_limit: null,
          version: 1,
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
    await caller('reader', 'first-reader');
    const { id: firstAdmin } = await caller('admin', 'first-admin');
    await caller('admin', 'second-admin');
    const endpoint = (url: string) =>
      sql<{
        id: number;
      }>`insert into webhook_endpoints (url, description, events, resources, enabled, failures, secret, version, created_at, updated_at) values (${url}, 'old', '["*"]', '["users"]', 1, 0, 'whsec_x', 1, ${now}, ${now}) returning id`.execute(
        db,
      );
    const plain = (await endpoint('https://hooks.example.com/a')).rows[0]!.id;
    const smuggled = (await endpoint('https://exa\r\nmple.com/b')).rows[0]!.id;
    const cased = (await endpoint('https://Hooks.EXAMPLE.com')).rows[0]!.id;

    expect((await migrateStorage(storage)).applied).toContain('0008-webhook-owners');

    const rows = await db
      .selectFrom('webhook_endpoints')
      .select(['id', 'url', 'owner_caller_id', 'resources', 'version', 'description'])
      .orderBy('id')
      .execute();
    expect(rows.map((row) => ({ ...row, owner_caller_id: Number(row.owner_caller_id) }))).toEqual([
      {
        id: plain,
        url: 'https://hooks.example.com/a',
        owner_caller_id: firstAdmin,
        resources: '["users"]',
        version: 1,
        description: 'old',
      },
      {
        id: smuggled,
        url: 'https://example.com/b',
        owner_caller_id: firstAdmin,
        resources: '["users"]',
        version: 1,
        description: 'old',
      },
      {
        id: cased,
        url: 'https://hooks.example.com/',
        owner_caller_id: firstAdmin,
        resources: '["users"]',
        version: 1,
        description: 'old',
      },
    ]);
  });
});
