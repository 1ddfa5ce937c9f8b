// npm run bench:backups [-- --megabytes 1024 --duration 10 --rounds 3 --warmup 3 --connections 64 --wait 600]
//
// Requests while a backup runs (issue 33, docs/backups.md), on SQLite,
// one process, in one run: rowi on a database grown to `--megabytes` (200 MB by default; the
// issue's figure is 1 GB: `--megabytes 1024`) with audit rows of about 800 bytes made with INSERT …
// SELECT (not through the API: a million requests would take too long here), then a warm-up load of
// `--warmup` seconds (unmeasured: the first load of a fresh process runs cold code), then rounds of
// two loads, in turn, their order alternating (no backup first in odd rounds, last in even ones) so
// that neither phase always follows the other:
//
// - "no backup": POST /v1/orders with `--connections` connections, and GET /v1/users/{id} on one
//   connection of its own alongside (one request after another);
// - "backup": the same, started once POST /v1/backups's operation is running (a copy of
//   the whole file, then its checks and SHA-256, on its thread); the run says how much of the load
//   the backup covered and how much of the backup the load covered (a backup that outlasts the
//   load is waited for, at most `--wait` seconds, before the next load starts).
//
// Printed: each round's orders/s and the reader's p50/p99 with the load average, the medians, and the targets with ✓/✗:
// the reader's p99 ≤ 25 ms while a backup runs, orders ≥ 50 % of their rate without one (same run),
// and the load average. They are judged only when the backup ran during at least 90 % of each of
// its loads (else '-': a load that outlasts its backup mixes in time without one; a shorter
// --duration then measures the backup alone). Loopback only; every load bounded in time; the work folder is removed.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execute, openSqliteConnection } from '../dist/src/db/sqlite-connection.js';
import { findLoadTool, measure } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM } from './lib/order-mix.mjs';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedItems, seedUsers, send } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    megabytes: { type: 'string', default: '200' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    wait: { type: 'string', default: '600' },
  },
});
const megabytes = Number(options.megabytes);
const duration = Number(options.duration);
const rounds = Number(options.rounds);
const READER_P99_MS = 25;
const ORDERS_SHARE = 0.5;
/** The least share of a backup round's load that the backup must cover for the targets to be judged. */
const LEAST_COVERED = 0.9;
const bench = {
  work: mkdtempSync(join(tmpdir(), 'rowi-backups-bench-')),
  children: new Set(),
  threads: 1,
  connections: Number(options.connections),
};
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(', ');

try {
  await main();
} finally {
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
}

async function main() {
  console.log(`load average at the start: ${load()}`);
  const tool = findLoadTool();
  const data = join(bench.work, 'rowi.db');
  const folder = join(bench.work, 'backups');
  const server = await startRowi(bench, 'rowi', {
    ...sqliteEnv(data, 1),
    ROWI_BACKUP_DIR: folder,
    ROWI_BACKUP_KEEP: '1',
  });
  const adminKey = await adminKeyOf(server);
  server.credentials = async () => ({ 'x-api-key': adminKey });
  const users = await seedUsers(server, 200);
  const items = await seedItems(server, ORDERED_ITEMS, STOCK_PER_ITEM);
  const started = Date.now();
  const bytes = await grow(data, megabytes * 1024 * 1024);
  console.log(
    `database grown to ${(bytes / 1024 / 1024).toFixed(0)} MB with audit rows in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );

  const headers = { 'x-api-key': adminKey, accept: 'application/json' };
  const reader = {
    name: 'GET /v1/users/{id} alongside',
    server,
    method: 'GET',
    path: `/v1/users/${users[100].id}`,
    headers,
    connections: 1,
  };
  const orders = {
    name: 'POST /v1/orders',
    server,
    method: 'POST',
    path: '/v1/orders',
    headers: { ...headers, 'content-type': 'application/json' },
    orders: { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 },
  };

  await measure(bench, tool, orders, Number(options.warmup), reader);
  const figures = { 'no backup': [], backup: [] };
  for (let round = 0; round < rounds; round++) {
    for (const phase of round % 2 === 0 ? ['no backup', 'backup'] : ['backup', 'no backup']) {
      const walAtStart = walMegabytes(data);
      const backup = phase === 'backup' ? await startBackup(server) : undefined;
      const loadStarted = Date.now();
      const result = await measure(bench, tool, orders, duration, reader);
      const loadEnded = Date.now();
      let covered = '';
      if (backup !== undefined) {
        const operation = await until(server, backup, loadEnded);
        const end = operation.finished_at === null ? loadEnded : Date.parse(operation.finished_at);
        const share = Math.min(1, Math.max(0, (end - loadStarted) / (loadEnded - loadStarted)));
        const took = operation.summary?.backup?.ms ?? end - loadStarted;
        const underLoad = Math.min(1, (loadEnded - loadStarted) / took);
        covered = `  backup ${operation.status}, ${(took / 1000).toFixed(1)} s, ran during ${(share * 100).toFixed(0)} % of the load, loaded ${(underLoad * 100).toFixed(0)} % of its time`;
        result.covered = share;
      }
      figures[phase].push(result);
      const alongside = result.alongsideFigures;
      console.log(
        `round ${round + 1}, ${phase.padEnd(9)} orders ${result.rps.toFixed(0).padStart(5)}/s p99 ${result.p99.toFixed(1)} ms; reader p50 ${alongside.p50.toFixed(2)} ms p99 ${alongside.p99.toFixed(2)} ms; main thread ${(result.mainBusy * 100).toFixed(0)} % busy; WAL ${walAtStart} → ${walMegabytes(data)} MB; load ${load()}${covered}`,
      );
    }
  }
  const median = (values) => {
    const sorted = [...values].sort((a, b) => a - b);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  };
  const summary = (phase) => ({
    rps: median(figures[phase].map((each) => each.rps)),
    readerP99: median(figures[phase].map((each) => each.alongsideFigures.p99)),
    covered: Math.min(...figures[phase].map((each) => each.covered ?? 1)),
  });
  const without = summary('no backup');
  const during = summary('backup');
  const share = during.rps / without.rps;
  // A load that outlasted its backup by much mixes in time without one: its figures say too little.
  const judged = during.covered >= LEAST_COVERED;
  const verdict = (met) => (!judged ? '-' : met ? '✓' : '✗');
  console.log(
    `\nMedians of ${rounds} rounds of ${duration} s, ${bench.connections} connections for the orders, database ${megabytes} MB:`,
  );
  console.log(`  no backup     orders ${without.rps.toFixed(0)}/s, reader p99 ${without.readerP99.toFixed(2)} ms`);
  console.log(
    `  backup        orders ${during.rps.toFixed(0)}/s, reader p99 ${during.readerP99.toFixed(2)} ms (the backup ran during at least ${(during.covered * 100).toFixed(0)} % of each load)`,
  );
  console.log('\nTargets (issue 33), measured in this run:');
  console.log(
    `  ${verdict(during.readerP99 <= READER_P99_MS)} GET /v1/users/{id} on one connection alongside, p99 while a backup runs <= ${READER_P99_MS} ms  measured: ${during.readerP99.toFixed(2)} ms (no backup, same run: ${without.readerP99.toFixed(2)} ms)`,
  );
  console.log(
    `  ${verdict(share >= ORDERS_SHARE)} POST /v1/orders while a backup runs >= ${ORDERS_SHARE * 100} % of their rate without  measured: ${(share * 100).toFixed(1)} %`,
  );
  if (!judged)
    console.log(
      `  (not judged: a backup ran during only ${(during.covered * 100).toFixed(0)} % of its load; a shorter --duration measures the backup alone)`,
    );
  if (megabytes < 1024)
    console.log(`  (the issue's database is 1 GB: --megabytes 1024; this run's is ${megabytes} MB)`);
  console.log(`load average at the end: ${load()}`);
}

/** The size of the database's write-ahead log, in MB (whole). */
function walMegabytes(file) {
  try {
    return (statSync(`${file}-wal`).size / 1024 / 1024).toFixed(0);
  } catch {
    return '0';
  }
}

/** Audit rows of about 800 bytes, 20,000 a transaction, until the file holds `target` bytes. */
async function grow(file, target) {
  const connection = await openSqliteConnection(file, { synchronous: 'normal', busyTimeoutMs: 10_000 });
  try {
    const insert = connection.prepare(`
      with recursive sequence(n) as (select 1 union all select n + 1 from sequence where n < 20000)
      insert into audit_events
        (at, request_id, caller_id, caller_name, credential, method, path, resource, record_id, action, status, duration_ms, client_ip)
      select strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), lower(hex(randomblob(16))), 1, 'admin', 'api_key', 'GET',
             '/v1/users/' || (n % 200 + 1) || '?filler=' || lower(hex(randomblob(340))), 'users', cast(n % 200 + 1 as text),
             'read', 200, 1.25, '127.0.0.1'
      from sequence`);
    while (statSync(file).size < target) execute(insert, []);
    execute(connection.prepare('pragma wal_checkpoint(TRUNCATE)'), []);
  } finally {
    connection.close();
  }
  return statSync(file).size;
}

/** POST /v1/backups, then waits until its operation runs (the copy has started). */
async function startBackup(server) {
  const operation = await send(server, 'POST', '/v1/backups', undefined, 202);
  const path = `/v1/operations/${operation.id}`;
  for (let attempt = 0; attempt < 200; attempt++) {
    const now = await send(server, 'GET', path, undefined, 200);
    if (now.status !== 'queued') return path;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${path} did not start within 5 s`);
}

/** The operation once it has ended (at most --wait seconds after the load). */
async function until(server, path, from) {
  for (;;) {
    const operation = await send(server, 'GET', path, undefined, 200);
    if (!['queued', 'running'].includes(operation.status)) return operation;
    if (Date.now() - from > Number(options.wait) * 1000) throw new Error(`${path} did not end within --wait`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
