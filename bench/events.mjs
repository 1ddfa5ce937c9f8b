// npm run bench:events [-- --duration 30 --rounds 1 --connections 64 --before DIR --profile DIR --webhook-thread thread|main]
//
// What the outbox and webhooks cost POST /v1/orders, and whether webhook delivery keeps up, in one
// run, on SQLite (one process each, fresh files, the same seed), loaded in turn round after round
// so that the machine's noise falls on all alike:
//
// - "before the outbox": rowi as it was before events (a build of the commit before them, in DIR:
//   `git worktree add DIR 66cf843 && ln -s $PWD/node_modules DIR/ && (cd DIR && npx tsc -p
//   tsconfig.build.json)`); left out when DIR holds no build;
// - "outbox": this rowi, every order writing order.created and a stock.changed per line;
// - "outbox + 1 webhook": the same with one webhook endpoint for every type, delivering to a
//   receiver on loopback that answers 204 after 5 ms (the deliveries go out while the load runs).
//
// Then, on the webhook's rowi, a last load with a receiver that answers 500 to the events of one
// item (a poison resource): the lag of every other resource's events is measured again.
//
// Printed: orders/s, p99, main-thread CPU per order, each against the first column; the delivery
// lag (the event's time, taken in its transaction, to the receiver's answer) p50/p99 during the
// load, how long after the load every event was delivered, and the targets (docs/performance.md) with
// ✓/✗. Loopback only; bounded loads (each `duration` s, the drains at most 15 s).
//
// --webhook-thread main: the webhook's rowi delivers on the thread that answers requests
// (ROWI_WEBHOOK_THREAD=main), to compare with a thread of its own (the default).
// --profile DIR: the webhook's rowi runs under `node --cpu-prof`, its profile written to DIR when
// the run ends (open it in Chrome's DevTools, Performance).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { findLoadTool, measure } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM } from './lib/order-mix.mjs';
import { ROOT, adminKeyOf, cliOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedItems, seedUsers, send } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    duration: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    before: { type: 'string', default: '/tmp/rowi-before' },
    profile: { type: 'string' },
    'webhook-thread': { type: 'string', default: 'thread' },
    concurrency: { type: 'string', default: '64' },
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
/** The receiver's answer time, and the targets (docs/performance.md, "Targets"). */
const ANSWER_MS = 5;
const LAG_P99_GOAL_MS = 2000;
const DRAIN_GOAL_MS = 5000;
const RATE_COST_GOAL = 0.05;
/** "Nothing of their p99": within the run-to-run noise of this bench, 10 %. */
const P99_NOISE = 0.1;
const DRAIN_LIMIT_MS = 15_000;
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
  // Every request the receiver answered: when, the event's id, resource and time.
  const answered = [];
  let poisoned = '';
  receiver = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const fail = event.resource === poisoned;
      setTimeout(() => {
        response.writeHead(fail ? 500 : 204).end();
        if (!fail)
          answered.push({
            at: Date.now(),
            id: event.id,
            resource: event.resource,
            created: Date.parse(event.created_at),
          });
      }, ANSWER_MS);
    });
  });
  receiver.keepAliveTimeout = 60_000;
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hooks`;

  const servers = [];
  const beforeCli = join(options.before, 'dist/src/cli.js');
  if (existsSync(beforeCli)) servers.push(await prepare('before the outbox', {}, [beforeCli, 'serve']));
  else
    console.log(
      `no build of rowi before the outbox in ${options.before}: its column is left out (see the top of bench/events.mjs)`,
    );
  const plain = await prepare('outbox', {});
  servers.push(plain);
  const profiled = options.profile
    ? ['--cpu-prof', `--cpu-prof-dir=${options.profile}`, cliOf(join(ROOT, 'dist')), 'serve']
    : undefined;
  const hooked = await prepare(
    'outbox + 1 webhook',
    {
      ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      ROWI_WEBHOOK_THREAD: options['webhook-thread'],
      ROWI_WEBHOOK_CONCURRENCY: options.concurrency,
    },
    profiled,
  );
  const endpoint = await send(hooked, 'POST', '/v1/webhook-endpoints', { url: receiverUrl, events: ['*'] }, 201);
  servers.push(hooked);

  const samples = new Map(servers.map((server) => [server.name, []]));
  const deliveries = [];
  for (let round = 0; round < rounds; round++) {
    for (const server of servers) {
      const from = answered.length;
      const started = Date.now();
      const figures = await measure(bench, tool, server.target, duration);
      const ended = Date.now();
      samples.get(server.name).push(figures);
      console.log(
        `round ${round + 1}  ${server.name.padEnd(20)} ${figures.rps.toFixed(0).padStart(6)} orders/s  p99 ${figures.p99.toFixed(1).padStart(6)} ms  ${(figures.cpuMs ?? 0).toFixed(3)} ms CPU/order`,
      );
      if (server !== hooked) continue;
      const drainedAfter = await drain(hooked, endpoint.id, ended);
      const during = answered.slice(from).filter((answer) => answer.created >= started && answer.created <= ended);
      const lags = during.map((answer) => answer.at - answer.created).sort((a, b) => a - b);
      const written = await countEventsSince(hooked, started);
      const delivered = new Set(
        answered
          .slice(from)
          .filter((answer) => answer.created >= started)
          .map((answer) => answer.id),
      ).size;
      deliveries.push({ lags, drainedAfter, written, delivered });
      console.log(
        `           webhook: ${delivered} of ${written} events delivered; lag p50 ${percentile(lags, 0.5)} ms, p99 ${percentile(lags, 0.99)} ms, max ${lags.at(-1)} ms; every event delivered ${drainedAfter === undefined ? `not within ${DRAIN_LIMIT_MS / 1000} s` : `${drainedAfter} ms`} after the load`,
      );
    }
  }

  // A poison resource: the first item's events answered 500 (retried on the schedule, held back),
  // the others measured as before.
  const poisonItem = hooked.target.orders.itemIds[0];
  poisoned = `/v1/items/${poisonItem}`;
  const from = answered.length;
  const started = Date.now();
  const poisonFigures = await measure(bench, tool, hooked.target, duration);
  const ended = Date.now();
  // The poison resource's deliveries stay pending: the others are given the same 5 s as above.
  await new Promise((resolve) => setTimeout(resolve, DRAIN_GOAL_MS));
  const others = answered
    .slice(from)
    .filter((answer) => answer.created >= started && answer.created <= ended)
    .map((answer) => answer.at - answer.created)
    .sort((a, b) => a - b);
  const held = await send(
    hooked,
    'GET',
    `/v1/webhook-endpoints/${endpoint.id}/deliveries?status=pending&limit=500`,
    undefined,
    200,
  );
  console.log(
    `poison     ${hooked.name.padEnd(20)} ${poisonFigures.rps.toFixed(0).padStart(6)} orders/s  p99 ${poisonFigures.p99.toFixed(1).padStart(6)} ms; the receiver answers 500 to ${poisoned}: ${held.data.length}${held.next_cursor ? '+' : ''} of its deliveries wait; the others' lag p50 ${percentile(others, 0.5)} ms, p99 ${percentile(others, 0.99)} ms`,
  );

  console.log(
    `\nPOST /v1/orders on SQLite, ${rounds} round(s) of ${duration} s, ${bench.connections} connections (medians):`,
  );
  const reference = samples.get(servers[0].name);
  for (const server of servers) {
    const runs = samples.get(server.name);
    const ratio = median(runs.map((run, index) => run.rps / reference[index].rps));
    console.log(
      `  ${server.name.padEnd(20)} ${median(runs.map((run) => run.rps))
        .toFixed(0)
        .padStart(
          6,
        )} orders/s (${(ratio * 100).toFixed(1)} % of ${servers[0].name})  p99 ${median(runs.map((run) => run.p99)).toFixed(1)} ms  ${median(runs.map((run) => run.cpuMs ?? 0)).toFixed(3)} ms CPU/order`,
    );
  }
  const plainRuns = samples.get(plain.name);
  const hookedRuns = samples.get(hooked.name);
  const rateCost = 1 - median(hookedRuns.map((run, index) => run.rps / plainRuns[index].rps));
  const p99Ratio = median(hookedRuns.map((run, index) => run.p99 / plainRuns[index].p99));
  const lagP99 = Math.max(...deliveries.map((run) => percentile(run.lags, 0.99)));
  const drained = deliveries.every(
    (run) => run.drainedAfter !== undefined && run.drainedAfter <= DRAIN_GOAL_MS && run.delivered >= run.written,
  );
  const cleanP99 = percentile(
    deliveries.flatMap((run) => run.lags).sort((a, b) => a - b),
    0.99,
  );
  const poisonP99 = percentile(others, 0.99);
  const mark = (ok) => (ok ? '✓' : '✗');
  const concurrency = Number(options.concurrency);
  console.log(
    `\none endpoint's ceiling: ROWI_WEBHOOK_CONCURRENCY ${concurrency} / ${ANSWER_MS} ms answer = ${Math.round((concurrency * 1000) / ANSWER_MS)} deliveries/s; the load wrote ${deliveries.map((run) => Math.round(run.written / duration)).join(', ')} events/s`,
  );
  console.log('\nwebhook targets (receiver on loopback answering in 5 ms, SQLite, same run):');
  console.log(
    `  ${mark(lagP99 <= LAG_P99_GOAL_MS)} delivery lag p99 during the load ${lagP99} ms (goal ≤ ${LAG_P99_GOAL_MS} ms)`,
  );
  console.log(
    `  ${mark(drained)} every event delivered within ${DRAIN_GOAL_MS / 1000} s after the load: ${deliveries.map((run) => `${run.delivered} of ${run.written} events, ${run.drainedAfter ?? '>' + DRAIN_LIMIT_MS} ms after`).join('; ')}`,
  );
  console.log(
    `  ${mark(rateCost <= RATE_COST_GOAL)} request rate cost ${(rateCost * 100).toFixed(1)} % against "outbox" without an endpoint (goal ≤ ${RATE_COST_GOAL * 100} %)`,
  );
  console.log(
    `  ${mark(p99Ratio <= 1 + P99_NOISE)} request p99 ${(p99Ratio * 100).toFixed(0)} % of "outbox" without an endpoint (goal: nothing beyond the noise, ≤ ${Math.round((1 + P99_NOISE) * 100)} %)`,
  );
  console.log(
    `  ${mark(others.length > 0 && poisonP99 <= Math.max(cleanP99 * 1.25, cleanP99 + 250))} a poison resource (500 to ${poisoned}): the others' lag p99 ${poisonP99} ms against ${cleanP99} ms without it (goal: unchanged, within 25 % or 250 ms; ${others.length} of the others' events delivered)`,
  );
  if (profiled) {
    // Stopped gently, so that node writes the profile (stopServers kills).
    hooked.child.kill('SIGTERM');
    await new Promise((resolve) => hooked.child.once('exit', resolve));
    console.log(`\nthe webhook rowi's CPU profile is in ${options.profile}`);
  }
}

/**
 * Waits until the endpoint has no pending delivery, at most
 * DRAIN_LIMIT_MS after `since`; answers the milliseconds after `since`, or undefined.
 */
async function drain(server, endpointId, since) {
  while (Date.now() - since < DRAIN_LIMIT_MS) {
    const pending = await send(
      server,
      'GET',
      `/v1/webhook-endpoints/${endpointId}/deliveries?status=pending&limit=500`,
      undefined,
      200,
    );
    if (pending.data.length === 0) return Date.now() - since;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return undefined;
}

function percentile(sorted, fraction) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
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

/** The events written since `since` (ms), counted through GET /v1/events (newest first). */
async function countEventsSince(server, since) {
  const after = new Date(since).toISOString();
  let count = 0;
  let cursor;
  do {
    const page = await send(
      server,
      'GET',
      `/v1/events?limit=500&created_after=${after}${cursor ? `&cursor=${cursor}` : ''}`,
      undefined,
      200,
    );
    count += page.data.length;
    cursor = page.next_cursor;
  } while (cursor && count < 5_000_000);
  return count;
}
