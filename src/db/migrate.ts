import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { Storage } from './connect.js';
import type { Db } from './database.js';
import * as m0001 from './migrations/0001-users.js';
import * as m0002 from './migrations/0002-inventory-orders.js';
import * as m0003 from './migrations/0003-callers-audit.js';
import * as m0004 from './migrations/0004-caller-rate-limit.js';
import * as m0005 from './migrations/0005-weather.js';
import * as m0006 from './migrations/0006-events.js';
import * as m0007 from './migrations/0007-delivery-claims.js';
import * as m0008 from './migrations/0008-webhook-owners.js';
import * as m0013 from './migrations/0013-owners.js';
import * as m0014 from './migrations/0014-operations.js';
import * as m0015 from './migrations/0015-delivery-order.js';
import * as m0016 from './migrations/0016-acting-for-users.js';
import * as m0017 from './migrations/0017-one-backup-at-a-time.js';
import * as m0018 from './migrations/0018-operation-access.js';
import * as m0019 from './migrations/0019-delivery-health.js';
import { isSqlite } from './dialect.js';

/**
 * Migrations are imported explicitly (not read from a folder), so the built package and the
 * sources run the same list. Names sort in the order they must run. Exported for the tests, which
 * make the database of an earlier rowi from all but the last.
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001-users': m0001,
  '0002-inventory-orders': m0002,
  '0003-callers-audit': m0003,
  '0004-caller-rate-limit': m0004,
  '0005-weather': m0005,
  '0006-events': m0006,
  '0007-delivery-claims': m0007,
  '0008-webhook-owners': m0008,
  '0013-owners': m0013,
  '0014-operations': m0014,
  '0015-delivery-order': m0015,
  '0016-acting-for-users': m0016,
  '0017-one-backup-at-a-time': m0017,
  '0018-operation-access': m0018,
  '0019-delivery-health': m0019,
};

/** The migrations this rowi knows, in order: a database with another is from a newer rowi. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS);

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

export interface MigrationOutcome {
  applied: string[];
}

/**
 * On PostgreSQL the migrator's own tables are named with the schema rowi uses (the first of the
 * search_path): Kysely otherwise takes tables of that name in ANY schema of the database for its
 * own, and would not create them in a second rowi schema of the same database.
 */
async function migratorFor(db: Db): Promise<Migrator> {
  if (isSqlite(db)) return new Migrator({ db, provider });
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return new Migrator({ db, provider, migrationTableSchema: rows[0]!.schema });
}

/**
 * Brings the database up to date. Kysely's migrator takes a lock (a row lock on SQLite's single
 * writer, an advisory lock on PostgreSQL) and rereads what is applied once it holds it, so
 * instances that start at once apply each migration once, and the others wait and find it done.
 */
export async function migrateToLatest(db: Db): Promise<MigrationOutcome> {
  const migrator = await migratorFor(db);
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: results.filter((result) => result.status === 'Success').map((result) => result.migrationName) };
}

/** migrateToLatest on a connection without the statement time limit (Storage.unbounded). */
export function migrateStorage(storage: Pick<Storage, 'unbounded'>): Promise<MigrationOutcome> {
  return storage.unbounded((db) => migrateToLatest(db));
}

/** Migrations this version has that the database has not applied (empty when it is up to date). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const migrations = await (await migratorFor(db)).getMigrations();
  return migrations.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
