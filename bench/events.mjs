// npm run bench:events [-- --duration 30 --rounds 1 --connections 64 --before DIR --webhooks-before DIR --profile DIR --webhook-thread thread|main]
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
//   receiver on loopback that answers 204 after 5 ms (the deliveries go out while the load runs);
// - "1 webhook, before": the same on the build of --webhooks-before (below), when there is one.
//
// Then, on the webhook's rowi, a last load with a receiver that answers 500 to the events of one
// item (a poison resource): the lag of every other resource's events is measured again.
//
// At a fixed offered rate (half the rate "outbox" reached in the rounds): an open-loop load
// (bench/lib/open-loop.mjs, as wrk2) on "outbox" and on "outbox + 1 webhook", each request timed
// from when it was meant to be sent; their p99 compared.
//
// Writes per delivery: rows written to the webhooks' tables (deliveries, attempts, sequences,
// endpoints, and the webhooks' cursor) per event delivered, counted by triggers the bench adds to
// the database for a short load of its own (after the timed ones, which run without them), on
// this rowi and on the build the target is set against (in DIR of --webhooks-before:
// `git worktree add --detach DIR 5078a92 && ln -s $PWD/node_modules DIR/ && (cd DIR && npm run
// build)`; left out when DIR holds no build).
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
import Database from 'better-sqlite3';
import { findLoadTool, load, measure } from './lib/load.mjs';
import { openLoop } from './lib/open-loop.mjs';
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
    'webhooks-before': { type: 'string', default: '/tmp/rowi-before-webhooks' },
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
/** The orders with an endpoint keep at least this share of their rate, and their p99 at most this many times. */
const RATE_KEPT_GOAL = 0.75;
const P99_GOAL = 1.5;
/** At a fixed offered rate (this share of the saturated rate), their p99 at most this many times. */
const OPEN_LOOP_SHARE = 0.5;
const OPEN_LOOP_P99_GOAL = 1.2;
/**
 * Fewer rows written per delivery, at least, than the build before; without that build, than
 * ROWS_BEFORE, what each delivery wrote when it was written, claimed, attempted and updated
 * (docs/performance.md's target).
 */
const WRITES_GOAL = 5;
const ROWS_BEFORE = 4.7;
/** The short load whose writes are counted. */
const COUNT_SECONDS = 3;
const DRAIN_LIMIT_MS = 15_000;
/** Tables whose rows count as the webhooks' writes (the webhooks' cursor's row of event_cursors only). */
const WEBHOOK_TABLES = ['webhook_deliveries', 'webhook_attempts', 'webhook_sequences', 'webhook_endpoints'];
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
            path: request.url,
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
  const hookedEnv = {
    ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    ROWI_WEBHOOK_THREAD: options['webhook-thread'],
    ROWI_WEBHOOK_CONCURRENCY: options.concurrency,
  };

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
  const hooked = await prepare('outbox + 1 webhook', hookedEnv, profiled);
  const endpoint = await send(hooked, 'POST', '/v1/webhook-endpoints', { url: receiverUrl, events: ['*'] }, 201);
  servers.push(hooked);
  // The build before webhooks were made cheap: a column of the rounds (its backlog sent before the
  // next load), and its writes per delivery.
  const webhooksBeforeCli = cliOf(join(options['webhooks-before'], 'dist'));
  const hookedBefore = existsSync(webhooksBeforeCli)
    ? await prepare('1 webhook, before', hookedEnv, [webhooksBeforeCli, 'serve'])
    : undefined;
  if (hookedBefore)
    hookedBefore.endpoint = await send(
      hookedBefore,
      'POST',
      '/v1/webhook-endpoints',
      { url: `${receiverUrl}/before`, events: ['*'] },
      201,
    );
  if (hookedBefore) servers.push(hookedBefore);
  else
    console.log(
      `no build of rowi before cheap webhooks in ${options['webhooks-before']}: its writes are left out (see the top of bench/events.mjs)`,
    );

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
      // Its backlog sent before the next load, which it would take CPU from.
      if (server === hookedBefore) await drain(server, server.endpoint.id, ended, () => true);
      if (server !== hooked) continue;
      const written = await countEventsSince(hooked, started);
      const deliveredSince = () =>
        new Set(
          answered
            .slice(from)
            .filter((answer) => answer.created >= started)
            .map((answer) => answer.id),
        ).size;
      const drained = await drain(hooked, endpoint.id, ended, () => deliveredSince() >= written);
      // When the last event was answered, after the load.
      const lastAnswer = Math.max(ended, ...answered.slice(from).map((answer) => answer.at));
      const drainedAfter = drained ? lastAnswer - ended : undefined;
      const during = answered.slice(from).filter((answer) => answer.created >= started && answer.created <= ended);
      const lags = during.map((answer) => answer.at - answer.created).sort((a, b) => a - b);
      const delivered = deliveredSince();
      deliveries.push({ lags, drainedAfter, written, delivered });
      console.log(
        `           webhook: ${delivered} of ${written} events delivered; lag p50 ${percentile(lags, 0.5)} ms, p99 ${percentile(lags, 0.99)} ms, max ${lags.at(-1)} ms; every event delivered ${drainedAfter === undefined ? `not within ${DRAIN_LIMIT_MS / 1000} s` : `${drainedAfter} ms`} after the load`,
      );
    }
  }

  // At a fixed offered rate: half of what "outbox" reached, open loop, on each in turn.
  const offered = Math.round(median(samples.get(plain.name).map((run) => run.rps)) * OPEN_LOOP_SHARE);
  const openSamples = new Map([plain, hooked].map((server) => [server.name, []]));
  for (let round = 0; round < rounds; round++)
    for (const server of [plain, hooked]) {
      const from = answered.length;
      const started = Date.now();
      const figures = await openLoop(server.target, offered, duration);
      openSamples.get(server.name).push(figures);
      console.log(
        `open loop  ${server.name.padEnd(20)} ${offered} orders/s offered: ${figures.rps.toFixed(0).padStart(6)} answered 2xx a second, p50 ${figures.p50.toFixed(1)} ms, p99 ${figures.p99.toFixed(1).padStart(6)} ms${figures.errors ? `, ${figures.errors} failed` : ''}`,
      );
      // Its backlog sent before the next load, which it would take CPU from.
      if (server === hookedBefore) await drain(server, server.endpoint.id, ended, () => true);
      if (server !== hooked) continue;
      const written = await countEventsSince(hooked, started);
      await drain(
        hooked,
        endpoint.id,
        Date.now(),
        () => new Set(answered.slice(from).map((answer) => answer.id)).size >= written,
      );
    }

  // Rows written per delivery, counted by triggers, on the build before and on this one.
  const writes = [];
  for (const server of [hookedBefore, hooked].filter(Boolean)) {
    const path = server === hooked ? '/hooks' : '/hooks/before';
    const endpointId = server === hooked ? endpoint.id : server.endpoint.id;
    const counter = countWrites(server.file);
    const from = answered.length;
    const started = Date.now();
    await load(bench, tool, server.target, COUNT_SECONDS);
    const written = await countEventsSince(server, started);
    const deliveredIds = () =>
      new Set(
        answered
          .slice(from)
          .filter((answer) => answer.path === path && answer.created >= started)
          .map((answer) => answer.id),
      ).size;
    await drain(server, endpointId, Date.now(), () => deliveredIds() >= written);
    // A moment for the last outcomes to be written (they follow the answers by up to 50 ms).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rows = counter.stop();
    const delivered = deliveredIds();
    writes.push({ name: server.name, rows, delivered, perDelivery: rows / Math.max(1, delivered) });
    console.log(
      `writes     ${server.name.padEnd(20)} ${rows} rows written to the webhooks' tables for ${delivered} of ${written} events delivered: ${(rows / Math.max(1, delivered)).toFixed(2)} a delivery`,
    );
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
  const rateKept = median(hookedRuns.map((run, index) => run.rps / plainRuns[index].rps));
  const p99Ratio = median(hookedRuns.map((run, index) => run.p99 / plainRuns[index].p99));
  const openPlain = openSamples.get(plain.name);
  const openP99Ratio = median(openSamples.get(hooked.name).map((run, index) => run.p99 / openPlain[index].p99));
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
    `  ${mark(rateKept >= RATE_KEPT_GOAL)} the orders keep ${(rateKept * 100).toFixed(1)} % of their rate against "outbox" without an endpoint (goal ≥ ${RATE_KEPT_GOAL * 100} %)`,
  );
  console.log(
    `  ${mark(p99Ratio <= P99_GOAL)} their p99 × ${p99Ratio.toFixed(2)} of "outbox" without an endpoint (goal ≤ × ${P99_GOAL})`,
  );
  console.log(
    `  ${mark(openP99Ratio <= OPEN_LOOP_P99_GOAL)} at a fixed ${offered} orders/s (open loop, half the rate): their p99 × ${openP99Ratio.toFixed(2)} of "outbox" without an endpoint (goal ≤ × ${OPEN_LOOP_P99_GOAL})`,
  );
  const [writesBefore, writesNow] = writes.length === 2 ? writes : [undefined, writes[0]];
  console.log(
    writesBefore
      ? `  ${mark(writesBefore.perDelivery / writesNow.perDelivery >= WRITES_GOAL)} rows written per delivery: ${writesNow.perDelivery.toFixed(2)} against ${writesBefore.perDelivery.toFixed(2)} before, × ${(writesBefore.perDelivery / writesNow.perDelivery).toFixed(1)} fewer (goal ≥ × ${WRITES_GOAL})`
      : `  ${mark(ROWS_BEFORE / writesNow.perDelivery >= WRITES_GOAL)} rows written per delivery: ${writesNow.perDelivery.toFixed(2)} (goal ≤ ${(ROWS_BEFORE / WRITES_GOAL).toFixed(2)}, a fifth of ${ROWS_BEFORE}; no build before in the run to compare with)`,
  );
  console.log(
    `  ${mark(others.length > 0 && poisonP99 <= Math.max(cleanP99 * 1.25, cleanP99 + 250))} a poison resource (500 to ${poisoned}): the others' lag p99 ${poisonP99} ms against ${cleanP99} ms without it (goal: within 25 % or 250 ms; ${others.length} of the others' events delivered)`,
  );
  if (profiled) {
    // Stopped gently, so that node writes the profile (stopServers kills).
    hooked.child.kill('SIGTERM');
    await new Promise((resolve) => hooked.child.once('exit', resolve));
    console.log(`\nthe webhook rowi's CPU profile is in ${options.profile}`);
  }
}

/**
 * Waits until the endpoint has no pending delivery and `delivered()` says every event is (a
 * delivery sent from memory has no row until its outcome), at most DRAIN_LIMIT_MS after `since`;
 * answers whether it did.
 */
async function drain(server, endpointId, since, delivered) {
  while (Date.now() - since < DRAIN_LIMIT_MS) {
    const pending = await send(
      server,
      'GET',
      `/v1/webhook-endpoints/${endpointId}/deliveries?status=pending&limit=500`,
      undefined,
      200,
    );
    if (pending.data.length === 0 && delivered()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

function percentile(sorted, fraction) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
}

async function prepare(name, env, args) {
  const file = join(bench.work, `${name.replace(/\W+/g, '-')}.db`);
  const server = await startRowi(bench, name.replace(/\W+/g, '-'), sqliteEnv(file, 1, env), args);
  server.name = name;
  server.file = file;
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

/**
 * Counts the rows written to the webhooks' tables of a rowi's SQLite file from now on, by triggers
 * added to it (and dropped by stop(), which answers the count).
 */
function countWrites(file) {
  const db = new Database(file);
  db.pragma('busy_timeout = 10000');
  db.exec(
    'create table if not exists bench_writes (count integer not null); delete from bench_writes; insert into bench_writes values (0);',
  );
  const triggers = [];
  for (const [table, when] of [
    ...WEBHOOK_TABLES.map((table) => [table, '']),
    ['event_cursors', "when new.name = 'webhooks'"],
  ])
    for (const action of ['insert', 'update', 'delete']) {
      const name = `bench_count_${table}_${action}`;
      const guard = action === 'delete' ? when.replace('new.', 'old.') : when;
      db.exec(
        `create trigger ${name} after ${action} on ${table} for each row ${guard} begin update bench_writes set count = count + 1; end;`,
      );
      triggers.push(name);
    }
  return {
    stop() {
      for (const name of triggers) db.exec(`drop trigger ${name}`);
      const { count } = db.prepare('select count from bench_writes').get();
      db.close();
      return count;
    },
  };
}
