// npm run bench:fields [-- --requests 3000 --rounds 3 --base /path/to/a/build/of/main]
//
// Only the fields asked for (issue 32, docs/reading.md): what `fields=` costs, and that reads without
// it cost what they cost before. rowi on SQLite (one process) with orders of 5 lines; each target is
// `--requests` requests one after the other on one keep-alive connection, the targets alternating
// for `--rounds` rounds (the order reversed every other round so drift hits all alike); the median
// requests/s of each. Same-run ratios, each with ✓/✗:
// - GET /v1/orders/{id}?fields=name,lines.quantity ≥ 0.9× GET /v1/orders/{id} (and the list likewise);
// - with --base (the dist/ of a build without fields=, e.g. the commit before), this rowi's plain
//   read and list ≥ 0.95× the base's, served side by side, each seeded alike.
// Bounded: at most rounds × targets × requests requests, loopback only.
import { mkdtempSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { adminKeyOf, cliOf, startRowi, stopServers } from './lib/processes.mjs';
import { HIGH_LIMITS } from './lib/rowi-env.mjs';
import { send } from './lib/setup.mjs';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '3' },
    base: { type: 'string' },
  },
});
const REQUESTS = Math.min(Number(values.requests), 20_000);
const ROUNDS = Math.min(Number(values.rounds), 7);
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-fields-')), children: new Set() };
const env = (file) => ({ ...HIGH_LIMITS, ROWI_DATA: file, ROWI_PORT: '0', ROWI_WORKERS: '1', ROWI_LOG_LEVEL: 'info' });

try {
  const server = await startSeeded('rowi-fields');
  const order = server.order;
  const targets = [
    { name: 'read', path: `/v1/orders/${order}` },
    { name: 'read, fields', path: `/v1/orders/${order}?fields=name,lines.quantity` },
    { name: 'list of 50', path: '/v1/orders?limit=50' },
    { name: 'list of 50, fields', path: '/v1/orders?limit=50&fields=name,lines.quantity' },
  ].map((target) => ({ ...target, server }));
  if (values.base) {
    const base = await startSeeded('rowi-base', [cliOf(values.base), 'serve']);
    targets.push(
      { name: 'base: read', path: `/v1/orders/${base.order}`, server: base },
      { name: 'base: list of 50', path: '/v1/orders?limit=50', server: base },
    );
  }
  const samples = new Map(targets.map((target) => [target.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) samples.get(target.name).push(await load(target));
  }
  const rate = (name) => median(samples.get(name));
  console.log(
    `load average ${loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}; ${REQUESTS} requests × ${ROUNDS} rounds a target`,
  );
  for (const target of targets) console.log(`  ${target.name.padEnd(22)} ${Math.round(rate(target.name))} requests/s`);
  const check = (label, ratio, goal) =>
    console.log(`  ${ratio >= goal ? '✓' : '✗'} ${label}: ${ratio.toFixed(2)}× (target ≥ ${goal}×)`);
  check('read with fields / read', rate('read, fields') / rate('read'), 0.9);
  check('list with fields / list', rate('list of 50, fields') / rate('list of 50'), 0.9);
  if (values.base) {
    check('read without fields / base read', rate('read') / rate('base: read'), 0.95);
    check('list without fields / base list', rate('list of 50') / rate('base: list of 50'), 0.95);
  }
} finally {
  await stopServers(bench);
}

/** A rowi on a database of its own, with 50 orders of 5 lines placed through its API. */
async function startSeeded(name, args) {
  const server = await startRowi(bench, name, env(join(bench.work, `${name}.db`)), args);
  const key = await adminKeyOf(server);
  server.key = key;
  server.credentials = async () => ({ 'x-api-key': key });
  const user = await send(server, 'POST', '/v1/users', { name: 'Bench', email: 'bench@example.com' }, 201);
  const lines = [];
  for (let n = 0; n < 5; n++) {
    const item = await send(server, 'POST', '/v1/items', { name: `I${n}`, sku: `BENCH-${n}`, price: '1.25' }, 201);
    await send(server, 'PUT', `/v1/items/${item.id}/stock`, { quantity: 100_000 }, 200);
    lines.push({ item_id: item.id, quantity: n + 1 });
  }
  for (let n = 0; n < 50; n++)
    server.order = (await send(server, 'POST', '/v1/orders', { name: `SO-${n}`, user_id: user.id, lines }, 201)).id;
  return server;
}

/** Requests/s of REQUESTS GETs of the target, one after the other on one keep-alive connection. */
async function load(target) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const started = performance.now();
  for (let n = 0; n < REQUESTS; n++) {
    await new Promise((resolve, reject) =>
      get(`${target.server.url}${target.path}`, { agent, headers: { 'x-api-key': target.server.key } }, (reply) => {
        if (reply.statusCode !== 200) reject(new Error(`${target.path} answered ${reply.statusCode}`));
        reply.resume();
        reply.on('end', resolve);
      }).on('error', reject),
    );
  }
  agent.destroy();
  return REQUESTS / ((performance.now() - started) / 1000);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
