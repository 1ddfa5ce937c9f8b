import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { it } from 'vitest';
import { tempFolder } from './temp.js';

/**
 * Which database the tests of this run use. vitest.config.ts runs the storage-touching test files
 * twice, on SQLite and in the PostgreSQL projects (only when ROWI_TEST_PG_URL is set), which set
 * ROWI_TEST_BACKEND.
 */
export const BACKEND: 'sqlite' | 'postgres' = process.env.ROWI_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

/**
 * `it` for a test no database decides (a setting refused before anything is opened, a shutdown
 * with nothing stored) in a file the PostgreSQL projects run too: it runs once, on SQLite.
 */
export const itOnce = it.runIf(BACKEND === 'sqlite');

/** PostgreSQL of this machine or CI (trust auth on loopback), or undefined. */
export const PG_URL = process.env.ROWI_TEST_PG_URL || undefined;

/** Schemas of test databases start with this, so a run can clear what an earlier one left. */
export const SCHEMA_PREFIX = 'rowi_test_';

export interface TestDatabase {
  /** The environment that points rowi at this database (ROWI_DATA or ROWI_DATABASE_URL). */
  env: Record<string, string>;
  /** The PostgreSQL schema's name (the only entry of the URL's search_path); undefined on SQLite. */
  schema?: string;
  /** Removes it (the schema and everything in it, or the folder of the file). */
  drop(): Promise<void>;
}

/**
 * A new, empty database of the run's backend: a SQLite file in a folder of its own, or a
 * PostgreSQL schema of its own, named in the URL's search_path, so test files run in parallel on
 * one PostgreSQL database without seeing each other's rows.
 */
export async function createTestDatabase(backend = BACKEND): Promise<TestDatabase> {
  if (backend === 'sqlite') {
    return { env: { ROWI_DATA: join(tempFolder('db'), 'rowi.db') }, drop: async () => {} };
  }
  const schema = `${SCHEMA_PREFIX}${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`create schema ${schema}`);
  return {
    env: { ROWI_DATABASE_URL: schemaUrl(schema) },
    schema,
    drop: async () => {
      await adminQuery(`drop schema if exists ${schema} cascade`);
    },
  };
}

/** ROWI_TEST_PG_URL with the schema as the only entry of the search_path. */
export function schemaUrl(schema: string): string {
  const url = new URL(requirePgUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

/** One statement on the test database, on a connection of its own. */
export async function adminQuery(text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: requirePgUrl() });
  await client.connect();
  try {
    return await client.query(text, values);
  } finally {
    await client.end();
  }
}

function requirePgUrl(): string {
  if (PG_URL === undefined) throw new Error('ROWI_TEST_PG_URL is not set: this test needs PostgreSQL');
  return PG_URL;
}
