// node bench/ab.mjs <other checkout> [--seconds 5 --rounds 3 --only users|orders]
//
// A same-run A/B of two builds: this checkout's rowi ("this") and another checkout's ("other",
// e.g. a `git worktree add --detach ../before <commit>` built with `npx tsc -b tsconfig.build.json`),
// each on a SQLite file of its own with the same seed (200 users, 200 stocked items, the first
// admin's API key), and the bare Fastify baseline. GET /v1/users/{id} (the three alternated, ABBA)
// and POST /v1/orders (the two rowi alternated) are loaded for `rounds` rounds; the medians of
// requests/s, p99, peak RSS and CPU per request are printed, with idle RSS, and this/other for each.
// A change is "no worse beyond noise" when this/other stays within the rounds' spread.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { load, measure, median } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM } from './lib/order-mix.mjs';
import { ROOT, adminKeyOf, cliOf, startProcess, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedItems, seedUsers } from './lib/setup.mjs';

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    // Only the loads whose operation contains this text (`users`, `orders`).
    only: { type: 'string', default: '' },
  },
});
if (positionals.length !== 1) {
  console.error('usage: node bench/ab.mjs <other checkout, built> [--seconds 5 --rounds 3]');
  process.exit(2);
}
const builds = { other: resolve(positionals[0]), this: ROOT };
const seconds = Number(options.seconds);
const rounds = Number(options.rounds);
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-ab-')), children: new Set(), threads: 1, connections: 64 };

try {
  const servers = [];
  for (const [name, root] of Object.entries(builds)) {
    const cli = cliOf(join(root, 'dist'));
    const server = await startRowi(bench, name, sqliteEnv(join(bench.work, `${name}.db`), 1), [cli, 'serve']);
    const key = await adminKeyOf(server);
    server.headers = { accept: 'application/json', 'x-api-key': key };
    server.credentials = async () => ({ 'x-api-key': key });
    const users = await seedUsers(server, 200);
    const items = await seedItems(server, ORDERED_ITEMS, STOCK_PER_ITEM);
    server.probe = `/v1/users/${users[100].id}`;
    server.mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
    servers.push(server);
  }
  const [other, current] = servers;
  const record = await (await fetch(`${current.url}${current.probe}`, { headers: current.headers })).json();
  const bare = await startProcess(
    bench,
    'bare',
    [join(ROOT, 'bench/bare-server.mjs')],
    { BARE_RECORD: JSON.stringify(record), BARE_STOCK: '{}', BARE_ORDER: '{}' },
    /listening (http:\/\/\S+)/,
  );
  bare.headers = { accept: 'application/json' };
  bare.probe = current.probe;

  const read = (server) => ({ server, method: 'GET', path: server.probe, headers: server.headers });
  const order = (server) => ({
    server,
    method: 'POST',
    path: '/v1/orders',
    headers: { ...server.headers, 'content-type': 'application/json' },
    orders: server.mix,
  });
  const figures = {};
  for (const [operation, target, loaded] of [
    ['GET /v1/users/{id}', read, [bare, other, current]],
    ['POST /v1/orders', order, [other, current]],
  ].filter(([operation]) => operation.includes(options.only))) {
    for (const server of loaded) await load(bench, 'wrk', target(server), 1);
    for (let round = 0; round < rounds; round += 1) {
      for (const server of round % 2 === 0 ? loaded : [...loaded].reverse()) {
        const run = await measure(bench, 'wrk', target(server), seconds);
        ((figures[operation] ??= {})[server.name] ??= []).push(run);
      }
    }
  }

  console.log(`idle RSS: other ${other.idleRssMb.toFixed(1)} MB, this ${current.idleRssMb.toFixed(1)} MB`);
  for (const [operation, byServer] of Object.entries(figures)) {
    console.log(`\n${operation}, medians of ${rounds} rounds of ${seconds} s`);
    const rows = Object.entries(byServer).map(([name, runs]) => {
      const middle = median(runs);
      return { name, ...middle, rss: middle.rssMb, all: runs.map((run) => Math.round(run.rps)) };
    });
    for (const row of rows) {
      console.log(
        `  ${row.name.padEnd(6)} ${Math.round(row.rps).toString().padStart(6)} req/s (rounds ${row.all.join(', ')})  p99 ${row.p99.toFixed(1)} ms  peak RSS ${row.rss.toFixed(1)} MB  CPU ${row.cpuMs.toFixed(3)} ms/request`,
      );
    }
    const [a, b] = [rows.find((row) => row.name === 'other'), rows.find((row) => row.name === 'this')];
    console.log(
      `  this/other: ${(b.rps / a.rps).toFixed(2)}× requests/s, ${(b.p99 / a.p99).toFixed(2)}× p99, ${(b.cpuMs / a.cpuMs).toFixed(2)}× CPU a request`,
    );
  }
} finally {
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
}
