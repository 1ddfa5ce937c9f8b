// npm run bench:events [-- --duration 5 --rounds 3 --connections 64 --before DIR]
//
// What the outbox costs POST /v1/orders, in one run, on SQLite (one process each, fresh files,
// the same seed), loaded in turn round after round so that the machine's noise falls on all alike:
//
// - "before the outbox": rowi as it was before events (a build of the commit before them, in DIR:
//   `git worktree add DIR 66cf843 && ln -s $PWD/node_modules DIR/ && (cd DIR && npx tsc -p
//   tsconfig.build.json)`); left out when DIR holds no build;
// - "outbox": this rowi, every order writing order.created and a stock.changed per line;
// - "outbox + 1 webhook": the same with one webhook endpoint for every type, delivering to a local
//   receiver that answers 204 at once (the deliveries go out while the load runs).
//
// Printed: orders/s, p99, main-thread CPU per order, each against "before" (and "outbox"), and
// how far the webhook deliveries were behind when the load ended. Loopback only; bounded loads.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { findLoadTool, measure } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM } from './lib/order-mix.mjs';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedItems, seedUsers, send } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    before: { type: 'string', default: '/tmp/rowi-before' },
  },
});
const duration = Number(options.duration);
const rounds = Number(options.rounds);
const bench = {
  work: mkdtempSync(join(tmpdir(), 'rowi-events-bench-')),
  children: new Set(),
  threads: 1,
  connections: Number(options.connections),
};
let receiver;

try {
  await main();
} finally {
  await stopServers(bench);
  receiver?.close();
  rmSync(bench.work, { recursive: true, force: true });
}

async function main() {
  const tool = findLoadTool();
  let received = 0;
  receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received++;
      response.writeHead(204).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hooks`;

  const servers = [];
  const beforeCli = join(options.before, 'dist/src/cli.js');
  if (existsSync(beforeCli)) servers.push(await prepare('before the outbox', {}, [beforeCli, 'serve']));
  else
    console.log(
      `no build of rowi before the outbox in ${options.before}: its column is left out (see the top of bench/events.mjs)`,
    );
  servers.push(await prepare('outbox', {}));
  const hooked = await prepare('outbox + 1 webhook', { ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' });
  await send(hooked, 'POST', '/v1/webhook-endpoints', { url: receiverUrl, events: ['*'] }, 201);
  servers.push(hooked);

  const samples = new Map(servers.map((server) => [server.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const server of servers) {
      const figures = await measure(bench, tool, server.target, duration);
      samples.get(server.name).push(figures);
      console.log(
        `round ${round + 1}  ${server.name.padEnd(20)} ${figures.rps.toFixed(0).padStart(6)} orders/s  p99 ${figures.p99.toFixed(1).padStart(6)} ms  ${(figures.cpuMs ?? 0).toFixed(3)} ms CPU/order`,
      );
    }
  }
  const behind = await send(
    hooked,
    'GET',
    '/v1/webhook-endpoints/1/deliveries?status=pending&limit=500',
    undefined,
    200,
  );
  const events = await countEvents(hooked);

  console.log(
    `\nPOST /v1/orders on SQLite, ${rounds} rounds of ${duration} s, ${bench.connections} connections (medians):`,
  );
  const reference = samples.get(servers[0].name);
  for (const server of servers) {
    const runs = samples.get(server.name);
    const rps = median(runs.map((run) => run.rps));
    const p99 = median(runs.map((run) => run.p99));
    const cpu = median(runs.map((run) => run.cpuMs ?? 0));
    const ratio = median(runs.map((run, index) => run.rps / reference[index].rps));
    console.log(
      `  ${server.name.padEnd(20)} ${rps.toFixed(0).padStart(6)} orders/s (${(ratio * 100).toFixed(1)} % of ${servers[0].name})  p99 ${p99.toFixed(1)} ms  ${cpu.toFixed(3)} ms CPU/order`,
    );
  }
  console.log(
    `\nwebhook: ${received} deliveries received by the end; ${events} events written; ${behind.data.length}${behind.next_cursor ? '+' : ''} deliveries still pending when the last load ended`,
  );
}

async function prepare(name, env, args) {
  const server = await startRowi(
    bench,
    name.replace(/\W+/g, '-'),
    sqliteEnv(join(bench.work, `${name.replace(/\W+/g, '-')}.db`), 1, env),
    args,
  );
  server.name = name;
  const key = await adminKeyOf(server);
  server.credentials = async () => ({ 'x-api-key': key });
  const [user] = await seedUsers(server, 1);
  const items = await seedItems(server, ORDERED_ITEMS, STOCK_PER_ITEM);
  server.target = {
    name,
    server,
    method: 'POST',
    path: '/v1/orders',
    headers: { accept: 'application/json', 'content-type': 'application/json' },
    credentials: server.credentials,
    orders: { userId: user.id, itemIds: items.map((item) => item.id), maxLines: 3 },
    storage: 'SQLite',
  };
  return server;
}

function median(values) {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
}

async function countEvents(server) {
  let count = 0;
  let cursor;
  do {
    const page = await send(server, 'GET', `/v1/events?limit=500${cursor ? `&cursor=${cursor}` : ''}`, undefined, 200);
    count += page.data.length;
    cursor = page.next_cursor;
  } while (cursor && count < 5_000_000);
  return count;
}
