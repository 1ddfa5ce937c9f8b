// npm run bench [-- --duration 10 --quick --connections 64 --threads 1 --rounds 1 --only users --no-postgres]
//
// Loads rowi and a bare Fastify baseline over loopback in the same run, for each operation
// (GET /v1/users/{id}, GET /v1/items/{id}/stock, POST /v1/orders), and prints requests/s, p50,
// p99 and peak RSS of each, and the ratio rowi/baseline: these machines are noisy, so only
// figures measured side by side are compared. Every load is bounded in time.
//
// rowi is loaded as its callers use it: with the first admin's API key (X-API-Key), and the
// audit trail on. GET /v1/users/{id} is also loaded with a JWT from POST /oauth/token, and
// against the same app without authentication and audit trail (bench/unauthenticated-server.mjs,
// which exists only here), to show what credentials and the audit trail cost.
//
// Storage and processes: GET /v1/users/{id} and POST /v1/orders are also loaded (API key + audit)
// against rowi with 2 worker processes on the same SQLite file, and against rowi on PostgreSQL
// with 1 and 2 workers (one fresh schema rowi_bench_<pid>, dropped at the end, in the database of
// ROWI_BENCH_PG_URL, else ROWI_TEST_PG_URL, else postgres://postgres@127.0.0.1:5432/test), and
// printed side by side. An unreachable PostgreSQL (or --no-postgres) skips its columns only.
// Every rowi runs with an explicit ROWI_WORKERS (the default, 0, is one process per core).
//
// Rate limits: every rowi counts requests as in production (in memory, per instance), with limits
// so high that no load is ever refused (a refusal fails the load: every non-2xx does). Their cost
// on GET /v1/users/{id} is measured with three more rowi, one process each, on copies of the same
// database, each loaded with that one request only, so that they differ in nothing but counting:
// every limit off (nothing counted, no RateLimit headers), counting in memory, and counting in
// Redis (ROWI_BENCH_REDIS_URL, else ROWI_TEST_REDIS_URL, else redis://127.0.0.1:6379); an
// unreachable Redis skips its column only. (rowi's own API key target is no fair reference: its
// audit trail grows with every other load of the run, and it is measurably slower for it.)
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { dirname, join } from 'node:path';
import { URLSearchParams, fileURLToPath } from 'node:url';
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
    // Load only the operations whose path contains this text (e.g. `users`, `stock`, `orders`).
    only: { type: 'string', default: '' },
    // Leave out the PostgreSQL columns of "Storage and processes".
    'no-postgres': { type: 'boolean', default: false },
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
// minRatio is over the bare baseline; minRatioToNoAuth over rowi without authentication (issue 4).
const GOALS = [
  { operation: 'GET /v1/users/{id}', minRatio: 0.5, maxP99: 10 },
  { operation: 'GET /v1/users/{id}', credential: 'API key', minRatioToNoAuth: 0.85 },
  { operation: 'GET /v1/users/{id}', credential: 'JWT', minRatioToNoAuth: 0.85 },
  { operation: 'POST /v1/orders', minRps: 2000, maxP99: 50 },
  // The overhead of rate limiting over the same rowi with every limit off (issue: ≤ 5 % in memory, ≤ 15 % with Redis).
  { operation: 'GET /v1/users/{id}', credential: 'API key', counted: 'memory', minRatioToLimitsOff: 0.95 },
  { operation: 'GET /v1/users/{id}', credential: 'API key', counted: 'redis', minRatioToLimitsOff: 0.85 },
];

// What serves a target, and how it is called: the first column of the table.
const LABELS = {
  bare: 'bare Fastify',
  noAuth: 'rowi (SQLite) no auth (bench only)',
  apiKey: 'rowi (SQLite) API key + audit',
  jwt: 'rowi (SQLite) JWT + audit',
  limitsOff: 'rowi (SQLite) API key + audit, rate limits off',
  limitsMemory: 'rowi (SQLite) API key + audit, rate limits in memory',
  limitsRedis: 'rowi (SQLite) API key + audit, rate limits in Redis',
};
// Every rowi counts requests, with budgets no load can spend: a bench must never measure refusals.
const HIGH_LIMITS = {
  ROWI_RATE_LIMIT_ANONYMOUS: '1000000000',
  ROWI_RATE_LIMIT_READER: '1000000000',
  ROWI_RATE_LIMIT_EDITOR: '1000000000',
  ROWI_RATE_LIMIT_ADMIN: '1000000000',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '1000000000',
  ROWI_AUTH_FAILURE_LIMIT: '1000000',
  // In memory, whatever the caller's environment says; only the Redis target sets it.
  ROWI_REDIS_URL: '',
};
// 0: unlimited, nothing counted (the failed-authentication budget cannot be 0, and counts only 401s).
const NO_LIMITS = {
  ...HIGH_LIMITS,
  ROWI_RATE_LIMIT_ANONYMOUS: '0',
  ROWI_RATE_LIMIT_READER: '0',
  ROWI_RATE_LIMIT_EDITOR: '0',
  ROWI_RATE_LIMIT_ADMIN: '0',
  ROWI_RATE_LIMIT_ORDERS_CREATE: '0',
};
const REDIS_URL = process.env.ROWI_BENCH_REDIS_URL || process.env.ROWI_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
// The operation whose rate-limit overhead is measured.
const RATE_LIMIT_OPERATION = 'GET /v1/users/{id}';
const LISTENING = /"msg":"listening on (http:\/\/[^"\s]+)\/v1/;
const CLI = join(root, 'dist/src/cli.js');

// "Storage and processes": these operations, on these columns (the first is rowi's API key target above).
const STORAGE_OPERATIONS = ['GET /v1/users/{id}', 'POST /v1/orders'];
const STORAGE_COLUMNS = [
  { storage: 'SQLite', workers: 1 },
  { storage: 'SQLite', workers: 2 },
  { storage: 'PostgreSQL', workers: 1 },
  { storage: 'PostgreSQL', workers: 2 },
];
const PG_URL = process.env.ROWI_BENCH_PG_URL || process.env.ROWI_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
const PG_SCHEMA = `rowi_bench_${process.pid}`;
// PostgreSQL waits at most this long for a connection, a statement or a lock while setting up and cleaning up.
const PG_TIMEOUT_MS = 10_000;

const work = mkdtempSync(join(tmpdir(), 'rowi-bench-'));
const children = new Set();
// Set once the bench's schema exists, so that cleanUp drops it.
let pgSchemaCreated = false;
let cleaning;
/** Ends every server (worker processes included), drops the PostgreSQL schema and the work folder; once. */
const cleanUp = () => (cleaning ??= (async () => {
  await stopServers();
  if (pgSchemaCreated) {
    try {
      await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`);
    } catch (error) {
      console.error(`could not drop the PostgreSQL schema ${PG_SCHEMA} (${describeUrl(PG_URL)}): ${error.message}`);
    }
  }
  rmSync(work, { recursive: true, force: true });
})());
process.on('SIGINT', () => {
  cleanUp().finally(() => process.exit(130));
});

try {
  await main();
} finally {
  await cleanUp();
}

async function main() {
  const tool = findLoadTool();
  const rowi = await startProcess('rowi', [CLI, 'serve'], sqliteEnv(join(work, 'rowi.db'), 1), LISTENING);
  // On an empty database rowi creates the caller "admin" and shows its key once, on stderr.
  const adminKey = await adminKeyOf(rowi);
  const apiKey = async () => ({ 'x-api-key': adminKey });
  // A token per load (the one of a long run could expire): the first request verifies it.
  const bearer = async () => ({ authorization: `Bearer ${await issueToken(rowi.url, 'admin', adminKey)}` });
  rowi.credentials = apiKey;

  const users = await seedUsers(rowi, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const items = await seedItems(rowi, ORDERED_ITEMS + 1, STOCK_PER_ITEM);
  // The stock probe is an item no order touches, so its record stays the one the baseline serves.
  const stockProbe = items.pop();
  const stock = await send(rowi, 'GET', `/v1/items/${stockProbe.id}/stock`, undefined, 200);
  // Orders are for another user than the GET probe, whose record the baseline serves unchanged.
  const mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
  // The baseline answers with a real order of the mix: its first, which has two lines (the mean).
  const sampleOrder = await send(rowi, 'POST', '/v1/orders', JSON.parse(orderBodies(mix)()), 201);

  // rowi without authentication serves a copy of rowi's database, so it answers the GET probe
  // with the very same record (id, timestamps, version, ETag).
  const noAuthData = join(work, 'no-auth.db');
  copyDatabase(join(work, 'rowi.db'), noAuthData);
  // It serves one process whatever ROWI_WORKERS says; set anyway, as for every rowi.
  const noAuth = await startProcess('no-auth', [join(root, 'bench/unauthenticated-server.mjs')], sqliteEnv(noAuthData, 1), LISTENING);
  noAuth.credentials = async () => ({});

  const bare = await startProcess('bare', [join(root, 'bench/bare-server.mjs')], {
    BARE_RECORD: JSON.stringify(probe),
    BARE_STOCK: JSON.stringify(stock),
    BARE_ORDER: JSON.stringify(sampleOrder),
  }, /listening (http:\/\/\S+)/);
  await sameAnswer(rowi, bare.url, `/v1/users/${probe.id}`);
  await sameAnswer(rowi, bare.url, `/v1/items/${stockProbe.id}/stock`);
  await sameOrderAnswer(bare.url, sampleOrder, orderBodies(mix)());
  await sameRecord([
    { label: 'rowi with an API key', url: rowi.url, headers: await apiKey() },
    { label: 'rowi with a JWT', url: rowi.url, headers: await bearer() },
    { label: 'rowi without authentication', url: noAuth.url, headers: {} },
  ], `/v1/users/${probe.id}`);
  await countsRequests(rowi, `/v1/users/${probe.id}`, 'instance');

  // The cost of rate limiting: rowi with every limit off, counting in memory and counting in Redis,
  // each on a copy of rowi's database (the same probe record, the same admin key), one process each.
  let limitsOff;
  let limitsMemory;
  let limitsRedis;
  let redis = { skipped: 'not loaded in this run (--only)' };
  if (RATE_LIMIT_OPERATION.includes(options.only)) {
    const offData = join(work, 'rate-limits-off.db');
    copyDatabase(join(work, 'rowi.db'), offData);
    limitsOff = await startProcess('rowi-rate-limits-off', [CLI, 'serve'], sqliteEnv(offData, 1, NO_LIMITS), LISTENING);
    limitsOff.credentials = apiKey;
    await countsRequests(limitsOff, `/v1/users/${probe.id}`, null);
    const memoryData = join(work, 'rate-limits-memory.db');
    copyDatabase(join(work, 'rowi.db'), memoryData);
    limitsMemory = await startProcess('rowi-rate-limits-memory', [CLI, 'serve'], sqliteEnv(memoryData, 1), LISTENING);
    limitsMemory.credentials = apiKey;
    await countsRequests(limitsMemory, `/v1/users/${probe.id}`, 'instance');
    const reachable = await tcpReachable(REDIS_URL);
    if (reachable === true) {
      const redisData = join(work, 'rate-limits-redis.db');
      copyDatabase(join(work, 'rowi.db'), redisData);
      limitsRedis = await startProcess('rowi-rate-limits-redis', [CLI, 'serve'], sqliteEnv(redisData, 1, { ROWI_REDIS_URL: REDIS_URL }), LISTENING);
      limitsRedis.credentials = apiKey;
      await countsRequests(limitsRedis, `/v1/users/${probe.id}`, 'redis');
      redis = { where: describeUrl(REDIS_URL) };
    } else {
      redis = { skipped: `${describeUrl(REDIS_URL)} cannot be reached: ${reachable}` };
      console.log(`Rate limits in Redis column skipped: ${redis.skipped} (set ROWI_BENCH_REDIS_URL)`);
    }
    await sameRecord([
      { label: 'rowi', url: rowi.url, headers: await apiKey() },
      { label: 'rowi (rate limits off)', url: limitsOff.url, headers: await apiKey() },
      { label: 'rowi (rate limits in memory)', url: limitsMemory.url, headers: await apiKey() },
      ...(limitsRedis ? [{ label: 'rowi (rate limits in Redis)', url: limitsRedis.url, headers: await apiKey() }] : []),
    ], `/v1/users/${probe.id}`);
  }

  // Storage and processes, for the operations this run loads: rowi with 2 workers on the same
  // SQLite file (it answers the very same record), and rowi on PostgreSQL with 1 and 2 workers.
  let sqliteTwo;
  let postgres = { skipped: 'not loaded in this run (--only)' };
  if (STORAGE_OPERATIONS.some((operation) => operation.includes(options.only))) {
    sqliteTwo = await startProcess('rowi-sqlite-2-workers', [CLI, 'serve'], sqliteEnv(join(work, 'rowi.db'), 2), LISTENING);
    sqliteTwo.credentials = apiKey;
    await sameAnswer(sqliteTwo, bare.url, `/v1/users/${probe.id}`);
    await sameRecord([
      { label: 'rowi (SQLite, 1 worker)', url: rowi.url, headers: await apiKey() },
      { label: 'rowi (SQLite, 2 workers)', url: sqliteTwo.url, headers: await apiKey() },
    ], `/v1/users/${probe.id}`);
    postgres = await setUpPostgres(rowi, `/v1/users/${probe.id}`, sampleOrder);
  }

  // A target is one request shape against one server, and each rowi target is paired with the
  // baseline answering the same request shape. Every rowi target of GET /v1/users/{id} on SQLite
  // in one process but the one without authentication names the no-auth target of its operation.
  const accept = { accept: 'application/json' };
  const getUser = { method: 'GET', path: `/v1/users/${probe.id}`, headers: accept };
  const noAuthGetUser = targetOf(LABELS.noAuth, 'GET /v1/users/{id}', noAuth, { ...getUser, credential: 'none' });
  const [bareGetUser, apiKeyGetUser] = pair(bare, rowi, 'GET /v1/users/{id}', getUser, apiKey);
  const postOrder = { method: 'POST', path: '/v1/orders', headers: { ...accept, 'content-type': 'application/json' } };
  const [bareOrders, apiKeyOrders] = pair(bare, rowi, 'POST /v1/orders', { ...postOrder, orders: mix }, apiKey);
  // The other columns of "Storage and processes", each paired with the baseline of its operation:
  // PostgreSQL's probe user and order mix (its own item ids) are records of its own.
  const variants = (operation, baseline, request, pgRequest) => [
    ...(sqliteTwo ? [storageTarget(sqliteTwo, 'SQLite', 2, operation, request, baseline)] : []),
    ...(postgres.one ? [1, 2].map((workers) => storageTarget(workers === 1 ? postgres.one : postgres.two, 'PostgreSQL', workers, operation, pgRequest, baseline)) : []),
  ];
  // The rate-limit targets: limits off between the two it is compared with, so each pair is loaded back to back.
  const limitsOffGetUser = limitsOff && targetOf(LABELS.limitsOff, RATE_LIMIT_OPERATION, limitsOff, { ...getUser, credential: 'API key', credentials: apiKey, variant: 'rate limits off' });
  const counting = (label, server, counted) => targetOf(label, RATE_LIMIT_OPERATION, server, { ...getUser, credential: 'API key', credentials: apiKey, variant: `rate limits in ${counted}`, limitsOff: limitsOffGetUser.name, counted });
  const allTargets = [
    bareGetUser,
    noAuthGetUser,
    { ...apiKeyGetUser, noAuth: noAuthGetUser.name },
    targetOf(LABELS.jwt, 'GET /v1/users/{id}', rowi, { ...getUser, credential: 'JWT', credentials: bearer, noAuth: noAuthGetUser.name }),
    ...(limitsOff ? [counting(LABELS.limitsMemory, limitsMemory, 'memory'), limitsOffGetUser] : []),
    ...(limitsRedis ? [counting(LABELS.limitsRedis, limitsRedis, 'redis')] : []),
    ...variants('GET /v1/users/{id}', bareGetUser, getUser, postgres.one && { ...getUser, path: `/v1/users/${postgres.probe.id}` }),
    ...pair(bare, rowi, 'GET /v1/items/{id}/stock', { method: 'GET', path: `/v1/items/${stockProbe.id}/stock`, headers: accept }, apiKey),
    bareOrders,
    apiKeyOrders,
    ...variants('POST /v1/orders', bareOrders, { ...postOrder, orders: mix }, postgres.one && { ...postOrder, orders: postgres.mix }),
  ];
  const targets = allTargets.filter((target) => target.operation.includes(options.only));

  console.log(`load: ${tool}, ${connections} connections, ${options.threads} thread(s), ${warmup} s warm-up + ${duration} s per target, ${rounds} round(s)\n`);
  const samples = new Map(targets.map((target) => [target.name, []]));
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round so drift of the machine hits every target alike.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      if (warmup > 0) await load(tool, target, warmup);
      samples.get(target.name).push(await measure(tool, target, duration));
    }
  }

  const results = targets.map((target) => ({ ...target, ...median(samples.get(target.name)) }));
  printTable(results);
  const ratios = ratiosOf(results, samples);
  const authRatios = authRatiosOf(results, samples);
  const limitRatios = limitRatiosOf(results, samples);
  printRatios(ratios, authRatios, limitRatios, redis);
  // Redis failing a call (or answering after 250 ms) makes rowi count that request in memory instead.
  const redisFellBack = limitsRedis === undefined ? [] : redisFailuresOf(limitsRedis);
  if (redisFellBack.length > 0) console.log(`warning: ${limitsRedis.name} logged ${redisFellBack.length} time(s) that Redis could not be reached (${[...new Set(redisFellBack)].join('; ')}): the request(s) then were counted in memory`);
  printGoals(results, ratios, authRatios, limitRatios, redis);
  const storageWorkers = storageTableOf(results, samples, postgres);
  printStorageTable(storageWorkers, postgres);

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
    // rowi with credentials and the audit trail over the same app without them (bench only).
    ratios_auth_over_no_auth: Object.fromEntries(authRatios),
    // GET /v1/users/{id}: rowi counting rate limits (memory: per instance; redis: in Redis) over the
    // same rowi with every limit off, same run; null: that column was skipped.
    ratios_rate_limit_over_off: limitsOff === undefined ? {} : { memory: limitRatios.get('memory') ?? null, redis: limitRatios.get('redis') ?? null },
    rate_limits: {
      limits: Object.fromEntries(Object.entries(HIGH_LIMITS).filter(([name]) => name !== 'ROWI_REDIS_URL')),
      redis: redis.skipped === undefined ? { url: redis.where, unreachable_logged: redisFellBack } : { skipped: redis.skipped },
    },
    // rowi (API key + audit) per storage and number of worker processes, same run; per operation,
    // per column: req/s, p50, p99, peak RSS (summed over the processes), ratio over the baseline;
    // and the 2-worker/1-worker speed-up of each storage.
    storage_workers: storageWorkers,
    postgres: postgres.skipped === undefined ? { database: postgres.where, schema: PG_SCHEMA, order_mix: { items: postgres.mix.itemIds.length } } : { skipped: postgres.skipped },
  };
  // A partial run (--only) does not replace the record of a whole one.
  writeFileSync(join(root, `bench/results/${options.only === '' ? 'latest' : 'partial'}.json`), `${JSON.stringify(record, null, 2)}\n`);
}

/** One request shape against one server; its name is its label and operation. */
function targetOf(label, operation, server, request) {
  return { name: `${label} ${operation}`, label, operation, server, ...request };
}

/** The baseline and rowi (with an API key) answering one operation; the rowi target names its baseline. */
function pair(bare, rowi, operation, request, credentials) {
  // The baseline gets the same request, credentials included, and ignores them.
  const baseline = targetOf(LABELS.bare, operation, bare, { ...request, credentials });
  return [baseline, targetOf(LABELS.apiKey, operation, rowi, { ...request, credential: 'API key', credentials, baseline: baseline.name, storage: 'SQLite', workers: 1 })];
}

/** "SQLite, 2 workers": a column of "Storage and processes". */
function columnOf({ storage, workers }) {
  return `${storage}, ${workers} worker${workers === 1 ? '' : 's'}`;
}

/** rowi on one storage with some worker processes, with an API key, paired with the baseline of the operation. */
function storageTarget(server, storage, workers, operation, request, baseline) {
  return targetOf(`rowi (${columnOf({ storage, workers })}) API key + audit`, operation, server, {
    ...request,
    credential: 'API key',
    credentials: server.credentials,
    baseline: baseline.name,
    storage,
    workers,
  });
}

/** rowi's API key target of the README's goals and earlier records: SQLite, one process, rate limits in memory. */
function isReference(target) {
  return target.variant === undefined && (target.storage === undefined || (target.storage === 'SQLite' && target.workers === 1));
}

/**
 * The environment of a rowi on a SQLite file; never PostgreSQL, whatever the caller's environment
 * says. Rate limits: HIGH_LIMITS in memory, unless `limits` says otherwise.
 */
function sqliteEnv(data, workers, limits = {}) {
  return { ROWI_HOST: '127.0.0.1', ROWI_PORT: '0', ROWI_DATA: data, ROWI_DATABASE_URL: '', ROWI_WORKERS: String(workers), ...HIGH_LIMITS, ...limits };
}

/** The error of each "Redis cannot be reached" rowi logged (once each time it stopped answering). */
function redisFailuresOf(server) {
  const failures = [];
  for (const line of readFileSync(server.logFile, 'utf8').split('\n')) {
    if (!line.includes('"msg":"Redis cannot be reached')) continue;
    try {
      const entry = JSON.parse(line);
      failures.push(entry.err?.message ?? 'no error logged');
    } catch {
      failures.push(line.slice(0, 200));
    }
  }
  return failures;
}

/** true if a TCP connection to the URL's host and port opens within 2 s; else why not. */
async function tcpReachable(text) {
  let url;
  try {
    url = new URL(text);
  } catch {
    return 'an invalid URL';
  }
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) });
    const done = (result) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(2000, () => done('no connection within 2 s'));
    socket.once('connect', () => done(true));
    socket.once('error', (error) => done(error.code || error.message));
  });
}

/**
 * Whether a rowi counts the probe's requests where it should: `counted` is what /v1/limits says
 * ("instance", "redis"), and the probe's answer carries RateLimit-Policy and RateLimit; null: its
 * limits are off, /v1/limits says so and the answer carries neither header.
 */
async function countsRequests(server, path, counted) {
  const headers = { accept: 'application/json', ...(await server.credentials()) };
  const limitsReply = await fetch(`${server.url}/v1/limits`, { headers });
  if (limitsReply.status !== 200) throw new Error(`${server.name}: GET /v1/limits answered ${limitsReply.status}: ${await limitsReply.text()}`);
  const limits = await limitsReply.json();
  const reply = await fetch(`${server.url}${path}`, { headers });
  await reply.arrayBuffer();
  const found = { policy: reply.headers.get('ratelimit-policy'), state: reply.headers.get('ratelimit') };
  const problem = counted === null
    ? (limits.rate_limit !== null || found.policy !== null || found.state !== null) && 'should count nothing'
    : (limits.counted !== counted || limits.rate_limit?.quota !== Number(HIGH_LIMITS.ROWI_RATE_LIMIT_ADMIN) || found.policy === null || found.state === null) && `should count in "${counted}" with the bench's limits`;
  if (reply.status !== 200 || problem) {
    throw new Error(`${server.name} ${problem || `answered ${reply.status}`}: GET /v1/limits says ${JSON.stringify({ rate_limit: limits.rate_limit, counted: limits.counted })}; GET ${path} answered ${reply.status} with RateLimit-Policy ${found.policy} and RateLimit ${found.state}`);
  }
}

/** A PostgreSQL (or Redis) URL without its password and parameters, to print. */
function describeUrl(text) {
  try {
    const url = new URL(text);
    url.password = '';
    url.search = '';
    return url.toString();
  } catch {
    return 'an invalid URL';
  }
}

/** One statement, on a connection of its own, each step bounded in time. */
async function pgQuery(connectionString, text) {
  const client = new pg.Client({
    connectionString,
    connectionTimeoutMillis: PG_TIMEOUT_MS,
    statement_timeout: PG_TIMEOUT_MS,
    lock_timeout: PG_TIMEOUT_MS,
    application_name: 'rowi-bench',
  });
  // An error of the connection after it failed (or ended) must not end the bench.
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.query(text);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * rowi on PostgreSQL in a fresh schema: one process started on the empty schema (its first admin's
 * key), seeded as the SQLite one is, then a second rowi with 2 workers on the same schema. Both
 * answer the probe user as SQLite's rowi does, but for the record's values (another database),
 * and alike. An unusable PostgreSQL is reported in one line and leaves { skipped }.
 */
async function setUpPostgres(sqliteRowi, sqliteProbePath, sqliteOrder) {
  if (options['no-postgres']) {
    console.log('PostgreSQL columns skipped: --no-postgres');
    return { skipped: '--no-postgres' };
  }
  const where = describeUrl(PG_URL);
  try {
    await pgQuery(PG_URL, `drop schema if exists ${PG_SCHEMA} cascade`);
    await pgQuery(PG_URL, `create schema ${PG_SCHEMA}`);
    pgSchemaCreated = true;
  } catch (error) {
    const reason = `${where} cannot be used: ${error.message || error.code || error}`;
    console.log(`PostgreSQL columns skipped: ${reason} (set ROWI_BENCH_PG_URL, or pass --no-postgres)`);
    return { skipped: reason };
  }
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${PG_SCHEMA}`);
  const env = { ROWI_HOST: '127.0.0.1', ROWI_PORT: '0', ROWI_DATABASE_URL: url.toString(), ...HIGH_LIMITS };
  const one = await startProcess('rowi-pg-1-worker', [CLI, 'serve'], { ...env, ROWI_WORKERS: '1' }, LISTENING);
  const key = await adminKeyOf(one);
  one.credentials = async () => ({ 'x-api-key': key });
  const users = await seedUsers(one, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const items = await seedItems(one, ORDERED_ITEMS, STOCK_PER_ITEM);
  const mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
  const sampleOrder = await send(one, 'POST', '/v1/orders', JSON.parse(orderBodies(mix)()), 201);
  sameShape('POST /v1/orders (first order of the mix)', [
    { label: 'rowi (SQLite)', status: 201, body: sqliteOrder },
    { label: 'rowi (PostgreSQL)', status: 201, body: sampleOrder },
  ]);

  const two = await startProcess('rowi-pg-2-workers', [CLI, 'serve'], { ...env, ROWI_WORKERS: '2' }, LISTENING);
  two.credentials = one.credentials;
  const path = `/v1/users/${probe.id}`;
  await sameRecord([
    { label: 'rowi (PostgreSQL, 1 worker)', url: one.url, headers: await one.credentials() },
    { label: 'rowi (PostgreSQL, 2 workers)', url: two.url, headers: await two.credentials() },
  ], path);
  sameShape(`GET /v1/users/{id} (probe users ${sqliteProbePath} and ${path})`, [
    { label: 'rowi (SQLite)', ...(await answerOf(sqliteRowi, sqliteProbePath)) },
    { label: 'rowi (PostgreSQL)', ...(await answerOf(one, path)) },
  ]);
  return { one, two, probe, mix, where };
}

/** Status, content type, whether there is an ETag, and the body of a GET with the server's credentials. */
async function answerOf(server, path) {
  const reply = await fetch(`${server.url}${path}`, { headers: { accept: 'application/json', ...(await server.credentials()) } });
  return { status: reply.status, contentType: reply.headers.get('content-type'), etag: reply.headers.get('etag') !== null, body: await reply.json() };
}

/** The shape of a JSON value: its members and their types, not its values. */
function shapeOf(value) {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shapeOf(value[0])];
  if (value === null) return 'null';
  if (typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((key) => [key, shapeOf(value[key])]));
  return typeof value;
}

/** Two servers answer alike but for the values: same status, content type, ETag or none, and body shape. */
function sameShape(what, answers) {
  const summary = ({ status, contentType, etag, body }) => JSON.stringify([status, contentType, etag, shapeOf(body)]);
  if (answers.every((answer) => summary(answer) === summary(answers[0]))) return;
  throw new Error(`${what} is not answered alike (status, content type, ETag, shape):\n${answers.map((answer) => `${answer.label}: ${summary(answer)}`).join('\n')}`);
}

/** The processes under pid (a cluster primary's workers), from /proc. */
function descendantsOf(pid) {
  const parents = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after "(comm)": state, ppid, …
      parents.push([Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])]);
    } catch {
      // It ended while listed.
    }
  }
  const found = [];
  for (let level = [pid]; level.length > 0; ) {
    level = parents.filter(([, parent]) => level.includes(parent)).map(([child]) => child);
    found.push(...level);
  }
  return found;
}

/** Whether a process still runs (a zombie does not). */
function running(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/** Kills every server and its worker processes (the primary first, so it forks no replacement), and waits until they are gone. */
async function stopServers() {
  const pids = [];
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const workers = descendantsOf(child.pid);
    child.kill('SIGKILL');
    for (const pid of workers) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    pids.push(child.pid, ...workers);
  }
  for (let waited = 0; waited < 5000 && pids.some(running); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
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
  const errFile = join(work, `${name}.stderr`);
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', openSync(logFile, 'w'), openSync(errFile, 'w')] });
  children.add(child);
  for (let waited = 0; waited < 20_000; waited += 50) {
    const match = listening.exec(readFileSync(logFile, 'utf8'));
    if (match) {
      const server = { name, child, logFile, errFile, url: match[1] };
      await untilServing(server);
      return server;
    }
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${name} did not start:\n${readFileSync(logFile, 'utf8')}${readFileSync(errFile, 'utf8')}`);
}

/**
 * Waits (at most 15 s) until a server just started stops shedding load: rowi may answer 503 for up
 * to a second after it listens (each worker process's first lag sample can span its start-up),
 * which setting up must not meet. Served (any other status than 503, the baseline's 404 included)
 * for 1.2 s in a row, on a new connection each time so that every worker process is asked.
 */
async function untilServing(server) {
  const statusOf = () => new Promise((resolve, reject) => {
    const request = httpGet(`${server.url}/v1/limits`, { agent: false, timeout: 5000 }, (reply) => {
      reply.resume();
      reply.on('end', () => resolve(reply.statusCode));
    });
    request.on('timeout', () => request.destroy(new Error('no answer within 5 s')));
    request.on('error', reject);
  });
  let since = Date.now();
  for (const started = Date.now(); Date.now() - started < 15_000; ) {
    if ((await statusOf()) === 503) since = Date.now();
    else if (Date.now() - since >= 1200) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${server.name} still sheds load (503) 15 s after it started`);
}

/** The first admin's key, from the banner rowi prints on stderr once it listens on an empty database. */
async function adminKeyOf(server) {
  for (let waited = 0; waited < 5000; waited += 50) {
    const match = /^ {2}ROWI_KEY=(rowi_\S+)$/m.exec(readFileSync(server.errFile, 'utf8'));
    if (match) return match[1];
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${server.name} printed no ROWI_KEY= on stderr (was its database empty?):\n${readFileSync(server.errFile, 'utf8')}`);
}

/** An access token from POST /oauth/token (client credentials: the caller's name and one of its keys). */
async function issueToken(url, clientId, clientSecret) {
  const reply = await fetch(`${url}/oauth/token`, {
    method: 'POST',
    headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }).toString(),
  });
  if (reply.status !== 200) throw new Error(`setting up: POST /oauth/token answered ${reply.status}: ${await reply.text()}`);
  return (await reply.json()).access_token;
}

/** A consistent copy of a SQLite database that a running server has open (WAL included). */
function copyDatabase(from, to) {
  const source = new Sqlite(from, { readonly: true });
  try {
    source.prepare('VACUUM INTO ?').run(to);
  } finally {
    source.close();
  }
}

/** Runs create(index) for every index, 50 at a time: quick, without flooding the server. */
async function inBatches(count, create) {
  const results = [];
  for (let start = 0; start < count; start += 50) {
    results.push(...(await Promise.all(Array.from({ length: Math.min(50, count - start) }, (_, offset) => create(start + offset)))));
  }
  return results;
}

async function seedUsers(server, count) {
  return inBatches(count, (index) => send(server, 'POST', '/v1/users', { name: `Bench User ${index}`, email: `bench${index}@example.com` }, 201));
}

/** Items at 2.50, each with its stock set to quantity (an item is created with none). */
async function seedItems(server, count, quantity) {
  return inBatches(count, async (index) => {
    const item = await send(server, 'POST', '/v1/items', { name: `Bench Item ${index}`, sku: `BENCH-${index}`, price: '2.50' }, 201);
    await send(server, 'PUT', `/v1/items/${item.id}/stock`, { quantity }, 200);
    return item;
  });
}

/** One request while setting up, with the server's credentials; any other status than the expected one stops the run. */
async function send(server, method, path, body, status) {
  const reply = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(await server.credentials()),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: globalThis.AbortSignal.timeout(30_000),
  });
  if (reply.status !== status) throw new Error(`setting up: ${method} ${path} answered ${reply.status}, not ${status}: ${await reply.text()}`);
  return reply.json();
}

async function sameAnswer(rowi, bareUrl, path) {
  const [rowiReply, bareReply] = await Promise.all([
    fetch(`${rowi.url}${path}`, { headers: { accept: 'application/json', ...(await rowi.credentials()) } }),
    fetch(`${bareUrl}${path}`),
  ]);
  if (rowiReply.status !== 200) throw new Error(`rowi answered ${rowiReply.status} to GET ${path}`);
  const [rowiBody, bareBody] = [await rowiReply.text(), await bareReply.text()];
  if (rowiBody !== bareBody) throw new Error(`the baseline does not return rowi's record:\n${rowiBody}\n${bareBody}`);
}

/**
 * rowi with each credential and rowi without authentication answer the probe alike: same status,
 * body, ETag and Content-Type, so the loads differ only in what authentication does.
 */
async function sameRecord(variants, path) {
  const answers = [];
  for (const { label, url, headers } of variants) {
    const reply = await fetch(`${url}${path}`, { headers: { accept: 'application/json', ...headers } });
    answers.push({ label, answer: JSON.stringify([reply.status, reply.headers.get('etag'), reply.headers.get('content-type'), await reply.text()]) });
  }
  const differing = answers.filter(({ answer }) => answer !== answers[0].answer);
  if (answers[0].answer.startsWith('[200,') && differing.length === 0) return;
  throw new Error(`GET ${path} is not answered alike:\n${answers.map(({ label, answer }) => `${label}: ${answer}`).join('\n')}`);
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
  const request = { ...target, headers: { ...target.headers, ...(await target.credentials?.()) } };
  try {
    return await (tool === 'wrk' ? runWrk(request, seconds) : runAutocannon(request, seconds));
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

/**
 * One measured run, with the server's peak RSS sampled while it is under load: with worker
 * processes, the sum over the primary and its workers (listed once, as the load starts).
 */
async function measure(tool, target, seconds) {
  let peak = 0;
  const pids = [target.server.child.pid, ...descendantsOf(target.server.child.pid)];
  const sampler = setInterval(() => {
    let kb = 0;
    for (const pid of pids) {
      try {
        const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
        if (rss) kb += Number(rss[1]);
      } catch {
        // A worker that ended (rowi replaces it; the load then fails or goes on without it).
      }
    }
    peak = Math.max(peak, kb / 1024);
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
  const rows = results.map((result) => [result.label, result.operation, result.rps.toFixed(0), result.p50.toFixed(2), result.p99.toFixed(2), result.rssMb.toFixed(0)]);
  const header = ['target', 'request', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column < 2 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

/**
 * The median over rounds of one target's requests/s over another's in the same round. Targets
 * compared are loaded one right after the other in every round, so each ratio is of two loads
 * seconds apart: the machine's drift (seen here: the same load varying by 2x within a minute)
 * cancels in the pair, which a ratio of two medians taken minutes apart does not do.
 */
function pairedRatio(samples, name, over) {
  const ratios = samples.get(name).map((run, round) => run.rps / samples.get(over)[round].rps).sort((a, b) => a - b);
  return ratios[Math.floor(ratios.length / 2)];
}

/**
 * rowi's requests/s over its baseline's, per operation, both from this run: rowi on SQLite in one
 * process under the operation's name, the other storages and processes as "operation (column)".
 */
function ratiosOf(results, samples) {
  const rowiResults = results.filter((result) => result.baseline);
  return new Map(
    rowiResults.map((result) => [
      isReference(result) ? result.operation : `${result.operation} (${columnOf(result)})`,
      pairedRatio(samples, result.name, result.baseline),
    ]),
  );
}

/**
 * "Storage and processes", per operation loaded: for each column, rowi's figures and its ratio over
 * the baseline (or why it is missing), and for each storage the 2-worker/1-worker speed-up of
 * requests/s (median of the ratios within a round, as the other ratios).
 */
function storageTableOf(results, samples, postgres) {
  const table = {};
  for (const operation of STORAGE_OPERATIONS) {
    const found = STORAGE_COLUMNS.map((column) => results.find((result) => result.operation === operation && result.credential === 'API key' && result.storage === column.storage && result.workers === column.workers));
    if (found[0] === undefined) continue; // not loaded in this run (--only)
    const row = {};
    STORAGE_COLUMNS.forEach((column, index) => {
      const result = found[index];
      row[columnOf(column)] = result === undefined
        ? { skipped: column.storage === 'PostgreSQL' ? postgres.skipped : 'not loaded' }
        : {
            rps: result.rps,
            p50_ms: result.p50,
            p99_ms: result.p99,
            peak_rss_mb: result.rssMb,
            ratio_over_bare: pairedRatio(samples, result.name, result.baseline),
          };
    });
    row.speedup_2_over_1_workers = {};
    for (const storage of ['SQLite', 'PostgreSQL']) {
      const [one, two] = [1, 2].map((workers) => found[STORAGE_COLUMNS.findIndex((column) => column.storage === storage && column.workers === workers)]);
      row.speedup_2_over_1_workers[storage] = one && two ? pairedRatio(samples, two.name, one.name) : null;
    }
    table[operation] = row;
  }
  return table;
}

function printStorageTable(table, postgres) {
  const operations = Object.keys(table);
  if (operations.length === 0) return;
  const titles = STORAGE_COLUMNS.map(columnOf);
  const cell = (figures) => (figures.rps === undefined ? 'skipped' : `${figures.rps.toFixed(0)} (${figures.p99.toFixed(2)})`);
  const rows = operations.map((operation) => [operation, ...titles.map((title) => cell({ ...table[operation][title], p99: table[operation][title].p99_ms }))]);
  const header = ['request', ...titles];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((text, column) => (column === 0 ? text.padEnd(widths[column]) : text.padStart(widths[column]))).join('  ');
  console.log(`\nStorage and processes (same run): rowi with an API key + audit, req/s (p99 ms)`);
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  const speedUp = (ratio) => (ratio === null ? 'skipped' : `x${ratio.toFixed(2)}`);
  const speedUps = operations.map((operation) => `${operation}: ${Object.entries(table[operation].speedup_2_over_1_workers).map(([storage, ratio]) => `${storage} ${speedUp(ratio)}`).join(', ')}`);
  console.log(`2 workers / 1 worker, req/s${rounds > 1 ? ' (median of the ratios within a round)' : ''}: ${speedUps.join('; ')}`);
  if (postgres.skipped !== undefined) console.log(`PostgreSQL skipped: ${postgres.skipped}`);
}

/** rowi with credentials and the audit trail over rowi without them, by target name, same run. */
function authRatiosOf(results, samples) {
  const withAuth = results.filter((result) => result.noAuth);
  return new Map(withAuth.map((result) => [result.name, pairedRatio(samples, result.name, result.noAuth)]));
}

/** rowi counting rate limits over the same rowi with every limit off, by where it counts ("memory", "redis"), same run. */
function limitRatiosOf(results, samples) {
  const counting = results.filter((result) => result.limitsOff);
  return new Map(counting.map((result) => [result.counted, pairedRatio(samples, result.name, result.limitsOff)]));
}

function printRatios(ratios, authRatios, limitRatios, redis) {
  const width = Math.max(...[...ratios.keys(), ...authRatios.keys()].map((name) => name.length)) + 4;
  console.log(`\nrowi/bare requests/s, same run${rounds > 1 ? ` (median over ${rounds} rounds of the ratio within a round)` : ''}:`);
  for (const [operation, ratio] of ratios) console.log(`  ${`${operation} `.padEnd(width, '.')} ${(ratio * 100).toFixed(1)} %`);
  if (authRatios.size === 0) return;
  console.log(`\nrowi with credentials and audit trail / rowi without authentication (bench only), requests/s, same run${rounds > 1 ? ' (median of the ratios within a round)' : ''}:`);
  for (const [name, ratio] of authRatios) console.log(`  ${`${name} `.padEnd(width, '.')} ${(ratio * 100).toFixed(1)} %`);
  if (limitRatios.size === 0) return;
  console.log(`\nrowi counting rate limits / rowi with rate limits off, ${RATE_LIMIT_OPERATION} with an API key + audit, requests/s, same run${rounds > 1 ? ' (median of the ratios within a round)' : ''}:`);
  const where = { memory: 'in memory (per instance)', redis: `in Redis${redis.where === undefined ? '' : ` (${redis.where})`}` };
  for (const counted of ['memory', 'redis']) {
    const ratio = limitRatios.get(counted);
    console.log(`  ${`${where[counted]} `.padEnd(width, '.')} ${ratio === undefined ? `skipped (${redis.skipped})` : `${(ratio * 100).toFixed(1)} %`}`);
  }
}

function printGoals(results, ratios, authRatios, limitRatios, redis) {
  const lines = [];
  for (const goal of GOALS) {
    const credential = goal.credential ?? 'API key';
    const rowiResult = results.find((result) => result.operation === goal.operation && result.credential === credential && isReference(result));
    if (rowiResult === undefined) continue; // not loaded in this run (--only)
    const check = (label, met, figure) => lines.push({ label: `target: ${goal.operation} rowi ${goal.credential ? `${goal.credential} + audit ` : ''}${label} `, verdict: met ? 'PASS' : 'MISS', figure });
    if (goal.minRatioToLimitsOff !== undefined) {
      if (!results.some((result) => result.limitsOff)) continue; // not loaded in this run
      const label = `target: ${goal.operation} rowi ${goal.credential} + audit, rate limits ${goal.counted === 'redis' ? 'in Redis' : 'in memory'} >= ${goal.minRatioToLimitsOff * 100} % of limits-off req/s `;
      const ratio = limitRatios.get(goal.counted);
      lines.push(ratio === undefined
        ? { label, verdict: 'SKIP', figure: redis.skipped }
        : { label, verdict: ratio >= goal.minRatioToLimitsOff ? 'PASS' : 'MISS', figure: `${(ratio * 100).toFixed(1)} %` });
      continue;
    }
    if (goal.minRatioToNoAuth !== undefined) {
      const ratio = authRatios.get(rowiResult?.name);
      check(`>= ${goal.minRatioToNoAuth * 100} % of no-auth req/s`, ratio >= goal.minRatioToNoAuth, `${(ratio * 100).toFixed(1)} %`);
    }
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
