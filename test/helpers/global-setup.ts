import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

/**
 * One temporary folder for every file a test run writes; removed when the run ends. The
 * PostgreSQL projects drop the test schemas of processes that are gone, before (what an
 * interrupted run left) and after (this run's).
 */
export default async function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), 'rowi-tests-'));
  project.provide('tmpRoot', root);
  if (project.name === 'fast' && !process.env.ROWI_TEST_PG_URL) {
    console.warn(
      '\n[rowi tests] ROWI_TEST_PG_URL is not set: the PostgreSQL runs of the storage tests are SKIPPED (.ci/run sets it).\n',
    );
  }
  if (project.name === 'fast' && !process.env.ROWI_TEST_NATS_URL) {
    console.warn(
      '\n[rowi tests] ROWI_TEST_NATS_URL is not set: the tests of the NATS bus are SKIPPED (.ci/run sets it).\n',
    );
  }
  if (project.name === 'fast' && !process.env.ROWI_TEST_REDIS_URL) {
    console.warn(
      '\n[rowi tests] ROWI_TEST_REDIS_URL is not set: the tests of rate-limit counters in Redis are SKIPPED (.ci/run sets it).\n',
    );
  }
  const postgres = project.name.endsWith('postgres') ? process.env.ROWI_TEST_PG_URL! : undefined;
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
    const { rows } = await client.query<{ name: string }>(
      "select nspname as name from pg_namespace where nspname like 'rowi\\_test\\_%'",
    );
    // A schema is named after the test process that made it (rowi_test_<pid>_…): only those of
    // processes that are gone are dropped, never those of a run going on beside this one.
    const orphans = rows.map((row) => row.name).filter((name) => !isAlive(Number(/^rowi_test_(\d+)_/.exec(name)?.[1])));
    for (const name of orphans) await client.query(`drop schema if exists ${pg.escapeIdentifier(name)} cascade`);
  } finally {
    await client.end();
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

declare module 'vitest' {
  export interface ProvidedContext {
    tmpRoot: string;
  }
}
