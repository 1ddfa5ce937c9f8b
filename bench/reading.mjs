// npm run bench:reading [-- --postgres] [--no-sqlite]
//
// The reading targets of issue 32 alone (bench/NOTES.md "Reading in bulk"): many items by id
// against single reads, and an order read with expand=user,lines.item against its plain read, on
// one rowi (one process) on SQLite and, with --postgres, on PostgreSQL (a schema of its own in the
// database of ROWI_BENCH_PG_URL, else ROWI_TEST_PG_URL, else the local `test` database, created
// for the run and dropped at its end), over one kept-alive loopback connection, same run; each
// target with its ratio and ✓/✗, and the load average before and after (the machine may be
// shared). `npm run bench` measures the same on its main rowi (bench/lib/reading.mjs). Bounded: a
// fixed number of requests, each with a time-out.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PG_URL, pgQuery } from './lib/postgres.mjs';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { measureReading, readingGoalLines } from './lib/reading.mjs';
import { HIGH_LIMITS, postgresEnv } from './lib/rowi-env.mjs';
import { describeUrl } from './lib/setup.mjs';

const { values } = parseArgs({
  options: { postgres: { type: 'boolean', default: false }, 'no-sqlite': { type: 'boolean', default: false } },
});
const PG_SCHEMA = `rowi_bench_reading_${process.pid}`;
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-reading-')), children: new Set() };
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

let missed = 0;
let schemaCreated = false;
try {
  if (!values['no-sqlite'])
    missed += await measure('SQLite', 'rowi-reading', {
      ...HIGH_LIMITS,
      ROWI_DATA: join(bench.work, 'rowi.db'),
      ROWI_PORT: '0',
      ROWI_WORKERS: '1',
    });
  if (values.postgres) {
    try {
      await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`);
      await pgQuery(PG_URL, `create schema ${PG_SCHEMA}`);
      schemaCreated = true;
    } catch (error) {
      console.log(`PostgreSQL skipped: ${describeUrl(PG_URL)} cannot be used: ${error.message || error.code}`);
      missed++;
    }
    if (schemaCreated) {
      const url = new URL(PG_URL);
      url.searchParams.set('options', `-c search_path=${PG_SCHEMA}`);
      missed += await measure(
        `PostgreSQL (${describeUrl(PG_URL)}, schema ${PG_SCHEMA})`,
        'rowi-reading-pg',
        postgresEnv(url.toString(), 1),
      );
    }
  }
} finally {
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
  if (schemaCreated)
    await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`).catch((error) =>
      console.error(`could not drop the PostgreSQL schema ${PG_SCHEMA}: ${error.message}`),
    );
}
if (missed > 0) process.exitCode = 1;

/** One rowi, the two comparisons on it, its lines; the count of targets missed. */
async function measure(label, name, env) {
  const server = await startRowi(bench, name, { ...env, ROWI_LOG_LEVEL: 'info' });
  const key = await adminKeyOf(server);
  server.credentials = async () => ({ 'x-api-key': key });
  const before = load();
  const reading = await measureReading(server);
  console.log(`${label}: load average before ${before}, after ${load()} (1, 5, 15 min)`);
  const lines = readingGoalLines(reading);
  for (const line of lines) console.log(`  ${line.verdict} ${line.label}: ${line.goal}, ${line.figure}`);
  return lines.filter((line) => line.verdict === '✗').length;
}
