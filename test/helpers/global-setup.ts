import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

/**
 * One temporary folder for every file a test run writes; removed when the run ends. The
 * "postgres" project drops the test schemas before (what an interrupted run left) and after.
 */
export default async function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), 'rowi-tests-'));
  project.provide('tmpRoot', root);
  if (project.name === 'sqlite' && !process.env.ROWI_TEST_PG_URL) {
    console.warn('\n[rowi tests] ROWI_TEST_PG_URL is not set: the PostgreSQL runs of the storage tests are SKIPPED (.ci/run sets it).\n');
  }
  const postgres = project.name === 'postgres' ? process.env.ROWI_TEST_PG_URL! : undefined;
  if (postgres) await dropLeftoverSchemas(postgres);
  return async () => {
    rmSync(root, { recursive: true, force: true });
    if (postgres) await dropLeftoverSchemas(postgres);
  };
}

async function dropLeftoverSchemas(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>("select nspname as name from pg_namespace where nspname like 'rowi\\_test\\_%'");
    for (const { name } of rows) await client.query(`drop schema if exists ${pg.escapeIdentifier(name)} cascade`);
  } finally {
    await client.end();
  }
}

declare module 'vitest' {
  export interface ProvidedContext {
    tmpRoot: string;
  }
}
