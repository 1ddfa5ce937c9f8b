// What each growing table costs per request on SQLite (docs/limits.md "Data kept and its retention").
// Run after `npm run build`: node bench/table-costs.mjs [--requests 3000]
//
// A rowi (in this process, on a fresh file) answers `--requests` authenticated reads
// (GET /v1/users/{id}), then as many orders (POST /v1/orders with an Idempotency-Key, one line
// each, two events each: order.created and stock.changed) with one webhook endpoint subscribed to
// every event, delivered to a receiver on loopback that answers 204. After each phase the bytes
// of every table with its indexes are read from SQLite's dbstat (pages in use × page size), and
// their growth divided by the requests is printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';

const { values: options } = parseArgs({ options: { requests: { type: 'string', default: '3000' } } });
const requests = Number(options.requests);
const dist = new URL('../dist/src/', import.meta.url);
const load = (path) => import(new URL(path, dist).href);
const { loadConfig } = await load('config/config.js');
const { openStorage } = await load('db/connect.js');
const { buildApp } = await load('app.js');
const { APP_THREADS } = await load('process/threads.js');
const { prepareDatabase } = await load('process/startup.js');
const { ensureFirstAdmin } = await load('resources/callers/api-keys.service.js');
const { openSqliteConnection, execute } = await load('db/sqlite-connection.js');

const TABLES = ['audit_events', 'events', 'webhook_deliveries', 'webhook_attempts', 'idempotency_keys'];
const receiver = createServer((request, response) => request.resume().on('end', () => response.writeHead(204).end()));
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const folder = mkdtempSync(join(tmpdir(), 'rowi-table-costs-'));
const file = join(folder, 'rowi.db');
const logger = pino({ level: 'silent' });
const config = loadConfig({
  ROWI_DATA: file,
  ROWI_LOG_LEVEL: 'silent',
  ROWI_AUDIT_FLUSH_INTERVAL: '50',
  // Nothing refused on a busy machine: every request must be recorded.
  ROWI_MAX_EVENT_LOOP_DELAY: '0',
  ROWI_RATE_LIMIT_ADMIN: '0',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '0',
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
});
const storage = await openStorage(config, logger);
await prepareDatabase(storage);
const admin = await ensureFirstAdmin(storage.db);
const app = await buildApp({ config, storage, logger, threads: APP_THREADS });
await app.ready();
const headers = { 'x-api-key': admin.key, 'content-type': 'application/json' };
const call = async (method, url, body, extra = {}) => {
  const reply = await app.inject({ method, url, headers: { ...headers, ...extra }, payload: body });
  if (reply.statusCode >= 300) throw new Error(`${method} ${url}: ${reply.statusCode} ${reply.body}`);
  return reply.json();
};

/** Bytes of each table and its indexes, from dbstat, on a connection of its own (1.5 s after the last request: the trail is written in batches). */
async function bytesByTable() {
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const connection = await openSqliteConnection(file, { synchronous: 'normal', busyTimeoutMs: 5000, readOnly: true });
  try {
    const rows = execute(
      connection.prepare(
        `select coalesce(m.tbl_name, s.name) as owner, sum(s.pgsize - s.unused) as used
         from dbstat as s left join sqlite_schema as m on m.name = s.name group by owner`,
      ),
    );
    return Object.fromEntries(rows.map((row) => [row.owner, Number(row.used)]));
  } finally {
    connection.close();
  }
}
const print = (phase, before, after, count) => {
  console.log(`\n${phase}: ${count} requests`);
  for (const table of TABLES) {
    const grew = (after[table] ?? 0) - (before[table] ?? 0);
    if (grew > 0) console.log(`  ${table.padEnd(20)} ${(grew / count).toFixed(0).padStart(5)} bytes a request`);
  }
};

const user = await call('POST', '/v1/users', { name: 'Table Costs', email: 'costs@example.com' });
const item = await call('POST', '/v1/items', { name: 'Costs', sku: 'COSTS-1', price: '2.50' });
await call('PUT', `/v1/items/${item.id}/stock`, { quantity: 10_000_000 });
await call('POST', '/v1/webhook-endpoints', {
  url: `http://127.0.0.1:${receiver.address().port}/rowi`,
  description: 'every event',
});
let before = await bytesByTable();
for (let index = 0; index < requests; index++) await call('GET', `/v1/users/${user.id}`);
let after = await bytesByTable();
print('GET /v1/users/{id} (API key)', before, after, requests);
before = after;
for (let index = 0; index < requests; index++)
  await call(
    'POST',
    '/v1/orders',
    { name: `order-${index}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    { 'idempotency-key': `costs-${index}-${Math.random().toString(36).slice(2)}` },
  );
// The deliveries are made and sent after the commit: wait for them (at most 60 s).
for (let waited = 0; waited < 60_000; waited += 500) {
  const pending = await storage.db
    .selectFrom('webhook_deliveries')
    .select((eb) => eb.fn.countAll().as('count'))
    .where('status', '=', 'pending')
    .executeTakeFirst();
  const made = (await bytesByTable()).webhook_attempts ?? 0;
  if (Number(pending.count) === 0 && made > 0) break;
  await new Promise((resolve) => setTimeout(resolve, 500));
}
after = await bytesByTable();
print('POST /v1/orders (Idempotency-Key, one webhook endpoint for every event)', before, after, requests);
await app.close();
await storage.close();
receiver.close();
rmSync(folder, { recursive: true, force: true });
