// npm run bench:exports [-- --rows 1000000]
//
// Exports of issue 32 (docs/reading.md): GET /v1/orders as NDJSON and as CSV, every order with its
// lines, from rowi on SQLite (one process), seeded with set-based SQL (not the API). Prints rows/s,
// the growth of rowi's RSS over its idle RSS while the export streams, and the p99 of
// GET /v1/users/{id} read on one keep-alive connection alongside; each target with ✓/✗. Bounded:
// every export at most 120 s, the reader stops with it.
import { mkdtempSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { adminKeyOf, rssMbOf, startRowi, stopServers } from './lib/processes.mjs';
import { HIGH_LIMITS } from './lib/rowi-env.mjs';
import { send } from './lib/setup.mjs';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '1000000' } } });
const ROWS = Number(values.rows);
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-exports-')), children: new Set() };
const file = join(bench.work, 'rowi.db');

try {
  const server = await startRowi(bench, 'rowi-exports', {
    ...HIGH_LIMITS,
    ROWI_DATA: file,
    ROWI_PORT: '0',
    ROWI_WORKERS: '1',
    ROWI_LOG_LEVEL: 'info',
  });
  const key = await adminKeyOf(server);
  server.credentials = async () => ({ 'x-api-key': key });
  const user = await send(server, 'POST', '/v1/users', { name: 'Bench', email: 'bench@example.com' }, 201);
  const items = [
    await send(server, 'POST', '/v1/items', { name: 'A', sku: 'BENCH-A', price: '1.25' }, 201),
    await send(server, 'POST', '/v1/items', { name: 'B', sku: 'BENCH-B', price: '2.50' }, 201),
  ];
  seedOrders(
    user.id,
    items.map((item) => item.id),
  );
  for (const format of ['application/x-ndjson', 'text/csv']) {
    const result = await exportAlongside(server, key, format, user.id);
    const rate = ROWS / result.seconds;
    console.log(
      `${format}: ${ROWS} orders (${result.lines} lines of text) in ${result.seconds.toFixed(1)} s = ${Math.round(rate)} orders/s; ` +
        `RSS ${result.idleRss.toFixed(0)} → peak ${result.peakRss.toFixed(0)} MB (+${(result.peakRss - result.idleRss).toFixed(1)}); ` +
        `GET /v1/users/{id} alongside: ${result.reads} reads, p99 ${result.p99.toFixed(1)} ms`,
    );
    console.log(`  ${rate >= 100_000 ? '✓' : '✗'} ≥ 100,000 orders/s on SQLite`);
    console.log(`  ${result.peakRss - result.idleRss <= 30 ? '✓' : '✗'} RSS growth ≤ 30 MB`);
    console.log(`  ${result.p99 <= 25 ? '✓' : '✗'} GET /v1/users/{id} p99 ≤ 25 ms alongside`);
  }
} finally {
  await stopServers(bench);
}

/** ROWS orders of two lines each, in a few statements (recursive CTE), beside the running rowi (WAL). */
function seedOrders(userId, [first, second]) {
  const db = new Database(file);
  db.pragma('busy_timeout = 10000');
  const now = new Date().toISOString();
  db.prepare(
    `with recursive n(i) as (select 1 union all select i + 1 from n where i < ?)
     insert into orders (name, user_id, status, total, created_by, created_at, updated_at, version)
     select 'SO-' || i, ?, 'placed', 500, null, ?, ?, 1 from n`,
  ).run(ROWS, userId, now, now);
  db.prepare(
    `insert into order_lines (order_id, item_id, position, quantity, unit_price)
     select id, ?, 0, 2, 125 from orders union all select id, ?, 1, 1, 250 from orders`,
  ).run(first, second);
  db.close();
}

async function exportAlongside(server, key, accept, userId) {
  const pid = server.child.pid;
  const idleRss = rssMbOf([pid]);
  let peakRss = idleRss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMbOf([pid]))), 100);
  let exporting = true;
  const latencies = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const reader = (async () => {
    while (exporting) {
      const started = performance.now();
      await new Promise((resolve, reject) =>
        get(`${server.url}/v1/users/${userId}`, { agent, headers: { 'x-api-key': key } }, (reply) => {
          reply.resume();
          reply.on('end', resolve);
        }).on('error', reject),
      );
      latencies.push(performance.now() - started);
    }
  })();
  const started = performance.now();
  const lines = await new Promise((resolve, reject) => {
    const request = get(`${server.url}/v1/orders`, { headers: { 'x-api-key': key, accept } }, (reply) => {
      if (reply.statusCode !== 200) reject(new Error(`export answered ${reply.statusCode}`));
      let count = 0;
      reply.on('data', (chunk) => {
        for (let index = chunk.indexOf(10); index !== -1; index = chunk.indexOf(10, index + 1)) count++;
      });
      reply.on('end', () => resolve(count));
      reply.on('error', reject);
    });
    request.setTimeout(120_000, () => request.destroy(new Error('export not done in 120 s')));
    request.on('error', reject);
  });
  const seconds = (performance.now() - started) / 1000;
  exporting = false;
  await reader;
  clearInterval(sampler);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const p99 = latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))] ?? 0;
  return { seconds, lines, idleRss, peakRss, reads: latencies.length, p99 };
}
