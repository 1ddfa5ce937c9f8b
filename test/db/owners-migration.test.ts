import { Migrator, sql, type Migration } from 'kysely';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
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
import * as m0008 from '../../src/db/migrations/0008-webhook-owners.js';
import { migrate } from '../../src/process/startup.js';
import { createTestDatabase } from '../helpers/database.js';
import { keptLog } from '../helpers/log.js';

/**
 * Migration 0013-owners on a database made before records had owners (docs/access.md "Existing
 * data"): every user, item and order goes to the first admin caller (the lowest admin id, not the
 * lowest caller id), callers keep their roles and see all records; with no admin the records stay
 * without an owner. On SQLite and PostgreSQL (fast-postgres).
 */
const BEFORE_OWNERS: Record<string, Migration> = {
  '0001-users': m0001,
  '0002-inventory-orders': m0002,
  '0003-callers-audit': m0003,
  '0004-caller-rate-limit': m0004,
  '0005-weather': m0005,
  '0006-events': m0006,
  '0007-delivery-claims': m0007,
  '0008-webhook-owners': m0008,
};

const opened: { storage: Storage; drop: () => Promise<void> }[] = [];
afterAll(async () => {
  for (const { storage, drop } of opened) {
    await storage.close();
    await drop();
  }
});

/** A fresh database of the run's backend, migrated to just before owners existed. */
async function databaseBeforeOwners(): Promise<Storage> {
  const database = await createTestDatabase();
  const storage = await openStorage(
    loadConfig({ ...database.env, ROWI_LOG_LEVEL: 'silent' }),
    pino({ level: 'silent' }),
  );
  opened.push({ storage, drop: database.drop });
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
  return storage;
}

const NOW = '2026-01-02T03:04:05.000Z';

/** Callers, a user, an item and an order, written as the old schema takes them. */
async function oldData(storage: Storage, roles: ('reader' | 'editor' | 'admin')[]): Promise<number[]> {
  const db = storage.db;
  const callerIds: number[] = [];
  for (const [index, role] of roles.entries()) {
    const { rows } = await sql<{
      id: number;
    }>`insert into callers (name, role, extra_scopes, removed_scopes, version, created_at, updated_at) values (${`old-${index}`}, ${role}, '', '', 1, ${NOW}, ${NOW}) returning id`.execute(
      db,
    );
    callerIds.push(Number(rows[0]!.id));
  }
  await sql`insert into users (name, email, email_key, version, created_at, updated_at) values ('Old', 'Old@example.com', 'old@example.com', 1, ${NOW}, ${NOW})`.execute(
    db,
  );
  await sql`insert into items (name, sku, price, version, created_at, updated_at) values ('Old item', 'OLD-1', 150, 1, ${NOW}, ${NOW})`.execute(
    db,
  );
  await sql`insert into orders (name, user_id, status, total, version, created_at, updated_at) values ('old-order', (select min(id) from users), 'placed', 150, 1, ${NOW}, ${NOW})`.execute(
    db,
  );
  return callerIds;
}

async function ownersAfter(storage: Storage) {
  const db = storage.db;
  const owners = async (table: 'users' | 'items' | 'orders') =>
    (await db.selectFrom(table).select('created_by').execute()).map((row) =>
      row.created_by === null ? null : Number(row.created_by),
    );
  return { users: await owners('users'), items: await owners('items'), orders: await owners('orders') };
}

describe('migration 0013: records made before owners', () => {
  it('users, items and orders go to the first admin caller (not the first caller); callers keep their role and see all records', async () => {
    const storage = await databaseBeforeOwners();
    const [, firstAdmin] = await oldData(storage, ['reader', 'admin', 'editor', 'admin']);
    expect((await migrateStorage(storage)).applied).toContain('0013-owners');
    expect(await ownersAfter(storage)).toEqual({ users: [firstAdmin], items: [firstAdmin], orders: [firstAdmin] });
    const callers = await storage.db.selectFrom('callers').select(['role', 'own_records']).orderBy('id').execute();
    expect(callers).toEqual([
      { role: 'reader', own_records: '' },
      { role: 'admin', own_records: '' },
      { role: 'editor', own_records: '' },
      { role: 'admin', own_records: '' },
    ]);
    const order = await storage.db.selectFrom('orders').select(['name', 'status', 'total', 'version']).execute();
    expect(order).toEqual([{ name: 'old-order', status: 'placed', total: 150, version: 1 }]);
  });

  it('with no admin caller the records stay without an owner (created_by null)', async () => {
    const storage = await databaseBeforeOwners();
    await oldData(storage, ['reader', 'editor']);
    expect((await migrateStorage(storage)).applied).toContain('0013-owners');
    expect(await ownersAfter(storage)).toEqual({ users: [null], items: [null], orders: [null] });
  });
});

describe("rowi serve: the start's line about migration 0013", () => {
  const ownersLines = async (roles: ('reader' | 'editor' | 'admin')[] | undefined) => {
    const storage = await databaseBeforeOwners();
    const callerIds = roles === undefined ? [] : await oldData(storage, roles);
    const { log, logger } = keptLog('info');
    await migrate(storage, logger);
    return { callerIds, lines: log.filter((line) => line.msg.includes('before owners existed')) };
  };

  it('names how many records went to which admin caller, when there were records', async () => {
    const { callerIds, lines } = await ownersLines(['reader', 'admin']);
    expect(lines.map((line) => line.msg)).toEqual([
      `3 records (users, items, orders) made before owners existed now belong to the first admin caller (id ${callerIds[1]})`,
    ]);
    expect(lines[0]).toMatchObject({ records: 3, owner: callerIds[1] });
  });

  it('says the records have no owner when there was no admin caller', async () => {
    const { lines } = await ownersLines(['reader']);
    expect(lines.map((line) => line.msg)).toEqual([
      '3 records (users, items, orders) made before owners existed have no owner, as there was no admin caller: callers that see all records see them, those that see only their own do not',
    ]);
  });

  it('says nothing of owners on a database that held no record (a new one)', async () => {
    const { lines } = await ownersLines(undefined);
    expect(lines).toEqual([]);
  });
});
