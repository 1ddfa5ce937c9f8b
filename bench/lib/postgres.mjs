// rowi on PostgreSQL for "Storage and processes": one fresh schema per run, in the database of
// ROWI_BENCH_PG_URL, else ROWI_TEST_PG_URL, else the local `test` database, dropped at the end.
// An unusable PostgreSQL skips its columns only.
import pg from 'pg';
import { answerOf, sameRecord, sameShape } from './checks.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM, orderBodies } from './order-mix.mjs';
import { adminKeyOf, startRowi } from './processes.mjs';
import { postgresEnv } from './rowi-env.mjs';
import { describeUrl, seedItems, seedUsers, send } from './setup.mjs';

export const PG_URL =
  process.env.ROWI_BENCH_PG_URL || process.env.ROWI_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
export const PG_SCHEMA = `rowi_bench_${process.pid}`;
// PostgreSQL waits at most this long for a connection, a statement or a lock while setting up and cleaning up.
const PG_TIMEOUT_MS = 10_000;

/** One statement, on a connection of its own, each step bounded in time. */
export async function pgQuery(connectionString, text) {
  const client = new pg.Client({
    connectionString,
    connectionTimeoutMillis: PG_TIMEOUT_MS,
    statement_timeout: PG_TIMEOUT_MS,
    lock_timeout: PG_TIMEOUT_MS,
    application_name: 'rowi-bench',
  });
  // An error of the connection after it failed (or ended) must not end the bench.
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.query(text);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * rowi on PostgreSQL in a fresh schema: one process started on the empty schema (its first admin's
 * key), seeded as the SQLite one is, then a second rowi with 2 workers on the same schema. Both
 * answer the probe user as SQLite's rowi does, but for the record's values (another database),
 * and alike. An unusable PostgreSQL (or `skip`, from --no-postgres) is reported in one line and
 * leaves { skipped }. bench.pgSchemaCreated tells dropBenchSchema that there is a schema to drop.
 */
export async function setUpPostgres(bench, skip, sqliteRowi, sqliteProbePath, sqliteOrder) {
  if (skip) {
    console.log('PostgreSQL columns skipped: --no-postgres');
    return { skipped: '--no-postgres' };
  }
  const where = describeUrl(PG_URL);
  const url = await createBenchSchema(bench);
  if (url.skipped) {
    console.log(`PostgreSQL columns skipped: ${url.skipped} (set ROWI_BENCH_PG_URL, or pass --no-postgres)`);
    return { skipped: url.skipped };
  }
  const one = await startRowi(bench, 'rowi-pg-1-worker', postgresEnv(url.toString(), 1));
  const key = await adminKeyOf(one);
  one.credentials = async () => ({ 'x-api-key': key });
  const users = await seedUsers(one, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const items = await seedItems(one, ORDERED_ITEMS, STOCK_PER_ITEM);
  const mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
  const sampleOrder = await send(one, 'POST', '/v1/orders', JSON.parse(orderBodies(mix)()), 201);
  sameShape('POST /v1/orders (first order of the mix)', [
    { label: 'rowi (SQLite)', status: 201, body: sqliteOrder },
    { label: 'rowi (PostgreSQL)', status: 201, body: sampleOrder },
  ]);

  const two = await startRowi(bench, 'rowi-pg-2-workers', postgresEnv(url.toString(), 2));
  two.credentials = one.credentials;
  const path = `/v1/users/${probe.id}`;
  await sameRecord(
    [
      { label: 'rowi (PostgreSQL, 1 worker)', url: one.url, headers: await one.credentials() },
      { label: 'rowi (PostgreSQL, 2 workers)', url: two.url, headers: await two.credentials() },
    ],
    path,
  );
  sameShape(`GET /v1/users/{id} (probe users ${sqliteProbePath} and ${path})`, [
    { label: 'rowi (SQLite)', ...(await answerOf(sqliteRowi, sqliteProbePath)) },
    { label: 'rowi (PostgreSQL)', ...(await answerOf(one, path)) },
  ]);
  return { one, two, probe, mix, where, url: url.toString() };
}

/**
 * The run's schema (PG_SCHEMA), created afresh in the database of PG_URL: the URL that puts rowi in
 * it, or { skipped } saying why PostgreSQL cannot be used. dropBenchSchema drops it at the end.
 */
export async function createBenchSchema(bench) {
  try {
    await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`);
    await pgQuery(PG_URL, `create schema ${PG_SCHEMA}`);
    bench.pgSchemaCreated = true;
  } catch (error) {
    return { skipped: `${describeUrl(PG_URL)} cannot be used: ${error.message || error.code || error}` };
  }
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${PG_SCHEMA}`);
  return url;
}

/** Drops the run's schema if setUpPostgres created it; a failure is printed, not thrown (it runs while cleaning up). */
export async function dropBenchSchema(bench) {
  if (!bench.pgSchemaCreated) return;
  try {
    await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`);
  } catch (error) {
    console.error(`could not drop the PostgreSQL schema ${PG_SCHEMA} (${describeUrl(PG_URL)}): ${error.message}`);
  }
}
