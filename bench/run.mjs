// npm run bench [-- --duration 10 --quick --connections 64 --threads 1 --rounds 1]
//
// Loads rowi and a bare Fastify baseline over loopback in the same run, for each operation
// (GET /v1/users/{id}, GET /v1/items/{id}/stock, POST /v1/orders), and prints requests/s, p50,
// p99 and peak RSS of each, and the ratio rowi/baseline: these machines are noisy, so only
// figures measured side by side are compared. Every load is bounded in time.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: options } = parseArgs({
  options: {
    duration: { type: 'string', default: process.env.BENCH_DURATION ?? '10' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    // One wrk thread: on two cores it leaves one core to the server under test, and one thread
    // drives 64 connections far faster than one Node process can answer them.
    threads: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '1' },
    quick: { type: 'boolean', default: false },
  },
});
const duration = options.quick ? 3 : Number(options.duration);
const warmup = options.quick ? 1 : Number(options.warmup);
const connections = Number(options.connections);
const rounds = Number(options.rounds);

// Orders cycle over this many items, each stocked so that no load this long can exhaust it:
// a 409 insufficient-stock would measure the refusal path, not placing orders.
const ORDERED_ITEMS = 200;
const STOCK_PER_ITEM = 10_000_000;
// What rowi must reach (README); the ratio targets are against the baseline of the same run.
const GOALS = [
  { operation: 'GET /v1/users/{id}', minRatio: 0.5, maxP99: 10 },
  { operation: 'POST /v1/orders', minRps: 2000, maxP99: 50 },
];

const work = mkdtempSync(join(tmpdir(), 'rowi-bench-'));
const children = new Set();
const cleanUp = () => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanUp();
  process.exit(130);
});

try {
  await main();
} finally {
  cleanUp();
}

async function main() {
  const tool = findLoadTool();
  const rowi = await startProcess('rowi', [join(root, 'dist/src/cli.js'), 'serve'], {
    ROWI_HOST: '127.0.0.1',
    ROWI_PORT: '0',
    ROWI_DATA: join(work, 'rowi.db'),
  }, /"msg":"listening on (http:\/\/[^"]+)\/v1"/);

  const users = await seedUsers(rowi.url, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const items = await seedItems(rowi.url, ORDERED_ITEMS + 1, STOCK_PER_ITEM);
  // The stock probe is an item no order touches, so its record stays the one the baseline serves.
  const stockProbe = items.pop();
  const stock = await send(rowi.url, 'GET', `/v1/items/${stockProbe.id}/stock`, undefined, 200);
  // Orders are for another user than the GET probe, whose record the baseline serves unchanged.
  const mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
  // The baseline answers with a real order of the mix: its first, which has two lines (the mean).
  const sampleOrder = await send(rowi.url, 'POST', '/v1/orders', JSON.parse(orderBodies(mix)()), 201);

  const bare = await startProcess('bare', [join(root, 'bench/bare-server.mjs')], {
    BARE_RECORD: JSON.stringify(probe),
    BARE_STOCK: JSON.stringify(stock),
    BARE_ORDER: JSON.stringify(sampleOrder),
  }, /listening (http:\/\/\S+)/);
  await sameAnswer(rowi.url, bare.url, `/v1/users/${probe.id}`);
  await sameAnswer(rowi.url, bare.url, `/v1/items/${stockProbe.id}/stock`);
  await sameOrderAnswer(bare.url, sampleOrder, orderBodies(mix)());

  // A target is one request shape against one server, and each rowi target is paired with the
  // baseline answering the same request shape; later issues add more (PostgreSQL).
  const accept = { accept: 'application/json' };
  const targets = [
    ...pair(bare, rowi, 'GET /v1/users/{id}', { method: 'GET', path: `/v1/users/${probe.id}`, headers: accept }),
    ...pair(bare, rowi, 'GET /v1/items/{id}/stock', { method: 'GET', path: `/v1/items/${stockProbe.id}/stock`, headers: accept }),
    ...pair(bare, rowi, 'POST /v1/orders', { method: 'POST', path: '/v1/orders', headers: { ...accept, 'content-type': 'application/json' }, orders: mix }),
  ];

  console.log(`load: ${tool}, ${connections} connections, ${options.threads} thread(s), ${warmup} s warm-up + ${duration} s per target, ${rounds} round(s)\n`);
  const samples = new Map(targets.map((target) => [target.name, []]));
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round so drift of the machine hits every target alike.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      await load(tool, target, warmup);
      samples.get(target.name).push(await measure(tool, target, duration));
    }
  }

  const results = targets.map((target) => ({ ...target, ...median(samples.get(target.name)) }));
  printTable(results);
  const ratios = ratiosOf(results);
  printRatios(ratios);
  printGoals(results, ratios);

  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const record = {
    at: new Date().toISOString(),
    tool,
    connections,
    threads: Number(options.threads),
    duration_s: duration,
    rounds,
    node: process.version,
    order_mix: { items: mix.itemIds.length, lines: `1-${mix.maxLines}`, quantity: 1, stock_per_item: STOCK_PER_ITEM },
    results: results.map(({ name, rps, p50, p99, rssMb }) => ({ name, rps, p50_ms: p50, p99_ms: p99, peak_rss_mb: rssMb })),
    // GET /v1/users/{id}'s ratio under its old name, so earlier records compare with this one.
    ratio_rowi_over_bare: ratios.get('GET /v1/users/{id}'),
    ratios_rowi_over_bare: Object.fromEntries(ratios),
  };
  writeFileSync(join(root, 'bench/results/latest.json'), `${JSON.stringify(record, null, 2)}\n`);
}

/** The baseline and rowi answering one operation; the rowi target names its baseline. */
function pair(bare, rowi, operation, request) {
  const baseline = `bare Fastify  ${operation}`;
  return [
    { name: baseline, operation, server: bare, ...request },
    { name: `rowi (SQLite) ${operation}`, operation, server: rowi, ...request, baseline },
  ];
}

function findLoadTool() {
  const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
  if (has('wrk')) return 'wrk';
  console.log('wrk not found; trying apt-get install wrk …');
  spawnSync('sh', ['-c', 'DEBIAN_FRONTEND=noninteractive apt-get install -y wrk || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk)'], { stdio: 'ignore', timeout: 180_000 });
  if (has('wrk')) return 'wrk';
  console.log('wrk unavailable; falling back to autocannon');
  return 'autocannon';
}

/** Starts a server process whose log goes to a file (as in production) and waits for its URL. */
async function startProcess(name, args, env, listening) {
  const logFile = join(work, `${name}.log`);
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', openSync(logFile, 'w'), 'ignore'] });
  children.add(child);
  for (let waited = 0; waited < 20_000; waited += 50) {
    const match = listening.exec(readFileSync(logFile, 'utf8'));
    if (match) return { name, child, logFile, url: match[1] };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${name} did not start:\n${readFileSync(logFile, 'utf8')}`);
}

/** Runs create(index) for every index, 50 at a time: quick, without flooding the server. */
async function inBatches(count, create) {
  const results = [];
  for (let start = 0; start < count; start += 50) {
    results.push(...(await Promise.all(Array.from({ length: Math.min(50, count - start) }, (_, offset) => create(start + offset)))));
  }
  return results;
}

async function seedUsers(url, count) {
  return inBatches(count, (index) => send(url, 'POST', '/v1/users', { name: `Bench User ${index}`, email: `bench${index}@example.com` }, 201));
}

/** Items at 2.50, each with its stock set to quantity (an item is created with none). */
async function seedItems(url, count, quantity) {
  return inBatches(count, async (index) => {
    const item = await send(url, 'POST', '/v1/items', { name: `Bench Item ${index}`, sku: `BENCH-${index}`, price: '2.50' }, 201);
    await send(url, 'PUT', `/v1/items/${item.id}/stock`, { quantity }, 200);
    return item;
  });
}

/** One request while setting up; any other status than the expected one stops the run. */
async function send(url, method, path, body, status) {
  const reply = await fetch(`${url}${path}`, {
    method,
    headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (reply.status !== status) throw new Error(`setting up: ${method} ${path} answered ${reply.status}, not ${status}: ${await reply.text()}`);
  return reply.json();
}

async function sameAnswer(rowiUrl, bareUrl, path) {
  const [rowiReply, bareReply] = await Promise.all([fetch(`${rowiUrl}${path}`, { headers: { accept: 'application/json' } }), fetch(`${bareUrl}${path}`)]);
  if (rowiReply.status !== 200) throw new Error(`rowi answered ${rowiReply.status} to GET ${path}`);
  const [rowiBody, bareBody] = [await rowiReply.text(), await bareReply.text()];
  if (rowiBody !== bareBody) throw new Error(`the baseline does not return rowi's record:\n${rowiBody}\n${bareBody}`);
}

/** An order cannot be placed twice alike, so the baseline's answer is compared with rowi's sample order. */
async function sameOrderAnswer(bareUrl, sampleOrder, body) {
  const reply = await fetch(`${bareUrl}/v1/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await reply.text();
  if (reply.status !== 201 || text !== JSON.stringify(sampleOrder)) {
    throw new Error(`the baseline does not answer POST /v1/orders as rowi does:\n${reply.status} ${text}\n201 ${JSON.stringify(sampleOrder)}`);
  }
}

/**
 * The order mix, as a generator of request bodies: order n has n % maxLines + 1 lines of
 * quantity 1 on the next items in turn, so consecutive orders touch distinct items and every item
 * is ordered alike. orderScript is the same rule in Lua, for wrk.
 */
function orderBodies({ userId, itemIds, maxLines }) {
  let count = 0;
  let cursor = 0;
  return () => {
    count += 1;
    const lines = Array.from({ length: (count % maxLines) + 1 }, () => ({ item_id: itemIds[cursor++ % itemIds.length], quantity: 1 }));
    return JSON.stringify({ name: `Bench order ${count}`, user_id: userId, lines });
  };
}

/** wrk calls request() for every request it sends, so each POST carries the next order of the mix. */
function orderScript({ userId, itemIds, maxLines }) {
  const stride = Math.floor(itemIds.length / Number(options.threads));
  return `
local items = {${itemIds.join(',')}}
local count, cursor, threads = 0, 0, 0

-- Each wrk thread starts elsewhere in the items, so threads do not order the same items in step.
function setup(thread)
  thread:set('first', threads * ${stride})
  threads = threads + 1
end

function init()
  cursor = first or 0
end

function request()
  count = count + 1
  local lines = {}
  for k = 1, count % ${maxLines} + 1 do
    lines[k] = string.format('{"item_id":%d,"quantity":1}', items[cursor % #items + 1])
    cursor = cursor + 1
  end
  return wrk.format(nil, nil, nil, string.format('{"name":"Bench order %d","user_id":${userId},"lines":[%s]}', count, table.concat(lines, ',')))
end
`;
}

async function load(tool, target, seconds) {
  // Where this load's lines start in the server's log: if it fails, the log tells which statuses.
  const logStart = statSync(target.server.logFile).size;
  try {
    return await (tool === 'wrk' ? runWrk(target, seconds) : runAutocannon(target, seconds));
  } catch (error) {
    error.message += loggedStatuses(target.server, logStart);
    throw error;
  }
}

/** The non-2xx statuses in rowi's access log since offset (the baseline logs none), e.g. 409 ×12. */
function loggedStatuses(server, offset) {
  const counts = new Map();
  for (const [, status] of readFileSync(server.logFile).subarray(offset).toString('utf8').matchAll(/"status":(\d+)/g)) {
    if (!status.startsWith('2')) counts.set(status, (counts.get(status) ?? 0) + 1);
  }
  return counts.size === 0 ? '' : `\n${server.name} logged: ${[...counts].map(([status, count]) => `${status} ×${count}`).join(', ')}`;
}

/** One measured run, with the server's peak RSS sampled while it is under load. */
async function measure(tool, target, seconds) {
  let peak = 0;
  const status = `/proc/${target.server.child.pid}/status`;
  const sampler = setInterval(() => {
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(status, 'utf8'));
    if (rss) peak = Math.max(peak, Number(rss[1]) / 1024);
  }, 100);
  try {
    return { ...(await load(tool, target, seconds)), rssMb: peak };
  } finally {
    clearInterval(sampler);
  }
}

async function runWrk(target, seconds) {
  const script = join(work, 'request.lua');
  // wrk takes method, headers and body from a Lua script.
  writeFileSync(
    script,
    [
      `wrk.method = ${JSON.stringify(target.method)}`,
      ...Object.entries(target.headers ?? {}).map(([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`),
      target.body === undefined ? '' : `wrk.body = ${JSON.stringify(JSON.stringify(target.body))}`,
      target.orders === undefined ? '' : orderScript(target.orders),
    ].join('\n'),
  );
  // Asynchronous, so the RSS sampler keeps running while wrk loads the server.
  const { stdout: output } = await promisify(execFile)('wrk', ['-t', options.threads, '-c', String(connections), '-d', `${seconds}s`, '--timeout', '5s', '--latency', '-s', script, `${target.server.url}${target.path}`], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(output) ?? /Socket errors: (.*)/.exec(output);
  if (errors) throw new Error(`${target.name}: ${errors[0]}\n${output}`);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)[1]),
    p50: toMs(/ 50%\s+([\d.]+\w+)/.exec(output)[1]),
    p99: toMs(/ 99%\s+([\d.]+\w+)/.exec(output)[1]),
  };
}

function toMs(text) {
  const [, number, unit] = /([\d.]+)(\w+)/.exec(text);
  return Number(number) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[unit];
}

async function runAutocannon(target, seconds) {
  const { default: autocannon } = await import('autocannon');
  const nextOrder = target.orders && orderBodies(target.orders);
  const result = await autocannon({
    url: `${target.server.url}${target.path}`,
    method: target.method,
    headers: target.headers,
    body: target.body === undefined ? undefined : JSON.stringify(target.body),
    requests: nextOrder && [{ setupRequest: (request) => ({ ...request, body: nextOrder() }) }],
    connections,
    duration: seconds,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

function median(runs) {
  const pick = (key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
  return { rps: pick('rps'), p50: pick('p50'), p99: pick('p99'), rssMb: Math.max(...runs.map((run) => run.rssMb)) };
}

function printTable(results) {
  const rows = results.map((result) => [result.name, result.rps.toFixed(0), result.p50.toFixed(2), result.p99.toFixed(2), result.rssMb.toFixed(0)]);
  const header = ['target', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

/** rowi's requests/s over its baseline's, per operation, both from this run. */
function ratiosOf(results) {
  const rowiResults = results.filter((result) => result.baseline);
  return new Map(rowiResults.map((result) => [result.operation, result.rps / results.find((other) => other.name === result.baseline).rps]));
}

function printRatios(ratios) {
  console.log('\nrowi/bare requests/s, same run:');
  const width = Math.max(...[...ratios.keys()].map((operation) => operation.length)) + 4;
  for (const [operation, ratio] of ratios) console.log(`  ${`${operation} `.padEnd(width, '.')} ${(ratio * 100).toFixed(1)} %`);
}

function printGoals(results, ratios) {
  const lines = [];
  for (const goal of GOALS) {
    const rowiResult = results.find((result) => result.baseline && result.operation === goal.operation);
    const check = (label, met, figure) => lines.push({ label: `target: ${goal.operation} rowi ${label} `, verdict: met ? 'PASS' : 'MISS', figure });
    if (goal.minRatio !== undefined) {
      const ratio = ratios.get(goal.operation);
      check(`>= ${goal.minRatio * 100} % of bare req/s`, ratio >= goal.minRatio, `${(ratio * 100).toFixed(1)} %`);
    }
    if (goal.minRps !== undefined) check(`>= ${goal.minRps} req/s`, rowiResult.rps >= goal.minRps, `${rowiResult.rps.toFixed(0)} req/s`);
    if (goal.maxP99 !== undefined) check(`p99 < ${goal.maxP99} ms`, rowiResult.p99 < goal.maxP99, `${rowiResult.p99.toFixed(2)} ms`);
  }
  const width = Math.max(...lines.map((line) => line.label.length)) + 3;
  for (const line of lines) console.log(`${line.label.padEnd(width, '.')} ${line.verdict} (${line.figure})`);
}
