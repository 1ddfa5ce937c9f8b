import { Migrator, type Migration, type MigrationProvider } from 'kysely';
import type { Db } from './database.js';
import * as m0001 from './migrations/0001-users.js';
import * as m0002 from './migrations/0002-inventory-orders.js';
import * as m0003 from './migrations/0003-callers-audit.js';

/**
 * Migrations are imported explicitly (not read from a folder), so the built package and the
 * sources run the same list. Names sort in the order they must run.
 */
const MIGRATIONS: Record<string, Migration> = {
  '0001-users': m0001,
  '0002-inventory-orders': m0002,
  '0003-callers-audit': m0003,
};

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

export interface MigrationOutcome {
  applied: string[];
}

/** Brings the database up to date; Kysely's migrator takes a lock, so concurrent starts are safe. */
export async function migrateToLatest(db: Db): Promise<MigrationOutcome> {
  const migrator = new Migrator({ db, provider });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: results.filter((result) => result.status === 'Success').map((result) => result.migrationName) };
}

/** Migrations this version has that the database has not applied (empty when it is up to date). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const migrations = await new Migrator({ db, provider }).getMigrations();
  return migrations.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
