// npm run bench [-- --duration 10 --quick --connections 64 --threads 1 --rounds 1 --only users --no-postgres --exports --export-rows 1000000]
//
// Loads rowi and a bare Fastify baseline over loopback in the same run, for each operation
// (GET /v1/users/{id}, GET /v1/items/{id}/stock, POST /v1/orders), and prints requests/s, p50,
// p99 and peak RSS of each, and the ratio rowi/baseline: these machines are noisy, so only
// figures measured side by side are compared. Every load is bounded in time.
//
// rowi is loaded as its callers use it: with the first admin's API key (X-API-Key), and the
// audit trail on. That main rowi serves the comparisons with the baseline and every operation, so
// its audit trail and database grow with every load of the run (orders, stock…), and it is
// measurably slower for it. Where rowi is compared with a rowi of other settings, both sides are
// therefore processes of their own on copies of the database taken right after seeding (the same
// probe record, the same admin key), loaded back to back; only the 2-worker rowi of "Storage and
// processes" shares the main rowi's file, and so its handicap.
//
// Authentication: GET /v1/users/{id} against the same app without authentication and audit trail
// (bench/unauthenticated-server.mjs, which exists only here), and against rowi-auth (the main
// rowi's settings, one process) with the API key and with a JWT from POST /oauth/token, shows
// what credentials and the audit trail cost; their two copies are taken at the same moment.
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
// unreachable Redis skips its column only.
//
// Also: the orders load again with a reader alongside (GET /v1/users/{id} on one more connection);
// rowi on better-sqlite3 (Node 20) and on node:sqlite (Node 24, when one is found) side by side;
// for every load the event loop's delay seen by rowi and the CPU its processes spent; after the
// loads, the stock ledger of every database the orders went to (the run fails if one does not
// balance); a batch of 1,000 stock levels against the same 1,000 single PUTs over one kept-alive
// connection (bench/lib/batch.mjs); 100 items by ?id= against 100 single reads, and an order read
// with expand=user,lines.item against its plain read (bench/lib/reading.mjs); with --exports, the
// export bench afterwards (bench/exports.mjs, a rowi of its own); and every target of docs/performance.md beside its measured
// value, with ✓ or ✗.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  countsRequests,
  ledgerOfPostgres,
  ledgerOfSqlite,
  sameAnswer,
  sameOrderAnswer,
  sameRecord,
} from './lib/checks.mjs';
import { findLoadTool, load, measure, median } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM, orderBodies } from './lib/order-mix.mjs';
import { dropBenchSchema, setUpPostgres } from './lib/postgres.mjs';
import { ROOT, adminKeyOf, startProcess, startRowi, stopServers } from './lib/processes.mjs';
import { redisFailuresOf, startRateLimitServers } from './lib/rate-limits.mjs';
import {
  authRatiosOf,
  limitRatiosOf,
  pairedRatio,
  printGoals,
  printRatios,
  printTable,
  ratiosOf,
} from './lib/report.mjs';
import { startDriverServers } from './lib/drivers.mjs';
import { writeRecord } from './lib/record.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { copyDatabase, issueToken, seedItems, seedUsers, send } from './lib/setup.mjs';
import { printStorageTable, storageTableOf } from './lib/storage-table.mjs';
import { BATCH_OPERATION, batchGoalLine, measureBatch } from './lib/batch.mjs';
import { IMPORT_OPERATION, importGoalLines, measureImports } from './lib/imports.mjs';
import { READING_OPERATION, measureReading, readingGoalLines } from './lib/reading.mjs';
import { measureStart, startGoalLine } from './lib/start-time.mjs';
import { LABELS, RATE_LIMIT_OPERATION, STORAGE_OPERATIONS, pair, storageTarget, targetOf } from './lib/targets.mjs';

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
    // Also run the export bench (bench/exports.mjs, its own rowi) once the rest is done, with this many orders.
    exports: { type: 'boolean', default: false },
    'export-rows': { type: 'string', default: '1000000' },
  },
});
const duration = options.quick ? 3 : Number(options.duration);
const warmup = options.quick ? 1 : Number(options.warmup);
const rounds = Number(options.rounds);

// All that the modules under lib/ share, handed to them: the folder of logs, databases and wrk's
// script; the servers started (every one is ended at the end); how loads are driven.
const bench = {
  work: mkdtempSync(join(tmpdir(), 'rowi-bench-')),
  children: new Set(),
  threads: Number(options.threads),
  connections: Number(options.connections),
  // Set by setUpPostgres once the bench's schema exists, so that cleanUp drops it.
  pgSchemaCreated: false,
};
let cleaning;
/** Ends every server (worker processes included), drops the PostgreSQL schema and the work folder; once. */
const cleanUp = () =>
  (cleaning ??= (async () => {
    await stopServers(bench);
    await dropBenchSchema(bench);
    rmSync(bench.work, { recursive: true, force: true });
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
  // First, alone on the machine: how long the Quick start's `npm start` takes to answer.
  const start = options.only === '' ? await measureStart(join(bench.work, 'start.db')) : undefined;
  const rowiData = join(bench.work, 'rowi.db');
  const rowi = await startRowi(bench, 'rowi', sqliteEnv(rowiData, 1));
  // On an empty database rowi creates the caller "admin" and shows its key once, on stderr.
  const adminKey = await adminKeyOf(rowi);
  const apiKey = async () => ({ 'x-api-key': adminKey });
  rowi.credentials = apiKey;

  const users = await seedUsers(rowi, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const probePath = `/v1/users/${probe.id}`;
  const items = await seedItems(rowi, ORDERED_ITEMS + 1, STOCK_PER_ITEM);
  // The stock probe is an item no order touches, so its record stays the one the baseline serves.
  const stockProbe = items.pop();
  const stock = await send(rowi, 'GET', `/v1/items/${stockProbe.id}/stock`, undefined, 200);
  // Orders are for another user than the GET probe, whose record the baseline serves unchanged.
  const mix = { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 };
  // The baseline answers with a real order of the mix: its first, which has two lines (the mean).
  const sampleOrder = await send(rowi, 'POST', '/v1/orders', JSON.parse(orderBodies(mix)()), 201);

  // The auth comparison: rowi without authentication and rowi-auth serve copies of rowi's database
  // taken together, so they answer the GET probe with the very same record (id, timestamps,
  // version, ETag) and start alike; neither carries the audit trail of the run's other loads.
  const noAuthData = join(bench.work, 'no-auth.db');
  const authData = join(bench.work, 'rowi-auth.db');
  // What the record-access predicate costs a read (docs/access.md): rowi-own serves a third copy,
  // where the admin sees only its own users; the probe is one it made, so it answers the same record.
  const ownData = join(bench.work, 'rowi-own.db');
  await copyDatabase(rowiData, noAuthData);
  await copyDatabase(rowiData, authData);
  await copyDatabase(rowiData, ownData);
  // It serves one process whatever ROWI_WORKERS says; set anyway, as for every rowi.
  const noAuth = await startRowi(bench, 'no-auth', sqliteEnv(noAuthData, 1), [
    join(ROOT, 'bench/unauthenticated-server.mjs'),
  ]);
  noAuth.credentials = async () => ({});
  const rowiAuth = await startRowi(bench, 'rowi-auth', sqliteEnv(authData, 1));
  rowiAuth.credentials = apiKey;
  const rowiOwn = await startRowi(bench, 'rowi-own', sqliteEnv(ownData, 1));
  rowiOwn.credentials = apiKey;
  await send(rowiOwn, 'PATCH', '/v1/callers/1', { record_access: { users: 'own' } }, 200);
  // A token per load (the one of a long run could expire), from the rowi it is for: the first request verifies it.
  const bearer = async () => ({ authorization: `Bearer ${await issueToken(rowiAuth.url, 'admin', adminKey)}` });

  const bare = await startProcess(
    bench,
    'bare',
    [join(ROOT, 'bench/bare-server.mjs')],
    {
      BARE_RECORD: JSON.stringify(probe),
      BARE_STOCK: JSON.stringify(stock),
      BARE_ORDER: JSON.stringify(sampleOrder),
    },
    /listening (http:\/\/\S+)/,
  );
  await sameAnswer(rowi, bare.url, probePath);
  await sameAnswer(rowi, bare.url, `/v1/items/${stockProbe.id}/stock`);
  await sameOrderAnswer(bare.url, sampleOrder, orderBodies(mix)());
  await sameRecord(
    [
      { label: 'rowi with an API key', url: rowi.url, headers: await apiKey() },
      { label: 'rowi-auth with an API key', url: rowiAuth.url, headers: await apiKey() },
      { label: 'rowi-auth with a JWT', url: rowiAuth.url, headers: await bearer() },
      { label: 'rowi-own, a caller that sees its own users', url: rowiOwn.url, headers: await apiKey() },
      { label: 'rowi without authentication', url: noAuth.url, headers: {} },
    ],
    probePath,
  );
  await countsRequests(rowi, probePath, 'instance');
  await countsRequests(rowiAuth, probePath, 'instance');

  const { limitsOff, limitsMemory, limitsRedis, redis } = RATE_LIMIT_OPERATION.includes(options.only)
    ? await startRateLimitServers(bench, { rowi, data: rowiData, credentials: apiKey, probePath })
    : { redis: { skipped: 'not loaded in this run (--only)' } };

  // Storage and processes, for the operations this run loads: rowi with 2 workers on the same
  // SQLite file (it answers the very same record), and rowi on PostgreSQL with 1 and 2 workers.
  let sqliteTwo;
  let postgres = { skipped: 'not loaded in this run (--only)' };
  if (STORAGE_OPERATIONS.some((operation) => operation.includes(options.only))) {
    sqliteTwo = await startRowi(bench, 'rowi-sqlite-2-workers', sqliteEnv(rowiData, 2));
    sqliteTwo.credentials = apiKey;
    await sameAnswer(sqliteTwo, bare.url, probePath);
    await sameRecord(
      [
        { label: 'rowi (SQLite, 1 worker)', url: rowi.url, headers: await apiKey() },
        { label: 'rowi (SQLite, 2 workers)', url: sqliteTwo.url, headers: await apiKey() },
      ],
      probePath,
    );
    postgres = await setUpPostgres(bench, options['no-postgres'], rowi, probePath, sampleOrder);
  }

  // Each rowi target is paired with the baseline answering the same request shape, or with the
  // rowi it is compared with. No auth stands between the two targets compared with it, and limits
  // off between its two, so that every round (in either order) loads each pair back to back.
  const accept = { accept: 'application/json' };
  const getUser = { method: 'GET', path: probePath, headers: accept };
  const [bareGetUser, apiKeyGetUser] = pair(bare, rowi, 'GET /v1/users/{id}', getUser, apiKey);
  const noAuthGetUser = targetOf(LABELS.noAuth, 'GET /v1/users/{id}', noAuth, { ...getUser, credential: 'none' });
  const withAuth = (label, credential, credentials) =>
    targetOf(label, 'GET /v1/users/{id}', rowiAuth, {
      ...getUser,
      credential,
      credentials,
      variant: 'auth comparison',
      noAuth: noAuthGetUser.name,
    });
  const authApiKeyGetUser = withAuth(LABELS.authApiKey, 'API key', apiKey);
  const ownRecordsGetUser = targetOf(LABELS.ownRecords, 'GET /v1/users/{id}', rowiOwn, {
    ...getUser,
    credential: 'API key',
    credentials: apiKey,
    variant: 'record access',
    allRecords: authApiKeyGetUser.name,
  });
  const postOrder = { method: 'POST', path: '/v1/orders', headers: { ...accept, 'content-type': 'application/json' } };
  const [bareOrders, apiKeyOrders] = pair(bare, rowi, 'POST /v1/orders', { ...postOrder, orders: mix }, apiKey);
  // The other columns of "Storage and processes", each paired with the baseline of its operation:
  // PostgreSQL's probe user and order mix (its own item ids) are records of its own.
  const variants = (operation, baseline, request, pgRequest) => [
    ...(sqliteTwo ? [storageTarget(sqliteTwo, 'SQLite', 2, operation, request, baseline)] : []),
    ...(postgres.one
      ? [1, 2].map((workers) =>
          storageTarget(
            workers === 1 ? postgres.one : postgres.two,
            'PostgreSQL',
            workers,
            operation,
            pgRequest,
            baseline,
          ),
        )
      : []),
  ];
  // The orders load again, with a reader on a connection of its own sending GET /v1/users/{id}
  // one after another at the same time: how long a read waits while rowi is busy writing.
  const readerAlongside = targetOf(`${LABELS.apiKey}, reading alongside`, 'GET /v1/users/{id}', rowi, {
    ...getUser,
    credential: 'API key',
    credentials: apiKey,
    connections: 1,
    variant: 'reader alongside orders',
  });
  const ordersWithReader = targetOf(`${LABELS.apiKey}, a reader alongside`, 'POST /v1/orders', rowi, {
    ...postOrder,
    orders: mix,
    credential: 'API key',
    credentials: apiKey,
    variant: 'with a reader alongside',
    alongside: readerAlongside,
  });
  // The two SQLite drivers, each on a copy of rowi's database taken at the same moment, loaded back to back.
  const drivers = STORAGE_OPERATIONS.some((operation) => operation.includes(options.only))
    ? await startDriverServers(bench, { data: rowiData, credentials: apiKey, probePath })
    : { skipped: 'not loaded in this run (--only)' };
  const driverTargets = (drivers.servers ?? [])
    .flatMap((server) => [
      targetOf(server.label, 'GET /v1/users/{id}', server, {
        ...getUser,
        credential: 'API key',
        credentials: apiKey,
        variant: 'driver',
        driver: server.driver,
      }),
      targetOf(server.label, 'POST /v1/orders', server, {
        ...postOrder,
        orders: mix,
        credential: 'API key',
        credentials: apiKey,
        variant: 'driver',
        driver: server.driver,
      }),
    ])
    .sort((a, b) => a.operation.localeCompare(b.operation));
  const limitsOffGetUser =
    limitsOff &&
    targetOf(LABELS.limitsOff, RATE_LIMIT_OPERATION, limitsOff, {
      ...getUser,
      credential: 'API key',
      credentials: apiKey,
      variant: 'rate limits off',
    });
  const counting = (label, server, counted) =>
    targetOf(label, RATE_LIMIT_OPERATION, server, {
      ...getUser,
      credential: 'API key',
      credentials: apiKey,
      variant: `rate limits in ${counted}`,
      limitsOff: limitsOffGetUser.name,
      counted,
    });
  const allTargets = [
    bareGetUser,
    apiKeyGetUser,
    // Loaded back to back with the rowi-auth target it is compared with, as that one is with no auth.
    ownRecordsGetUser,
    authApiKeyGetUser,
    noAuthGetUser,
    withAuth(LABELS.authJwt, 'JWT', bearer),
    ...(limitsOff ? [counting(LABELS.limitsMemory, limitsMemory, 'memory'), limitsOffGetUser] : []),
    ...(limitsRedis ? [counting(LABELS.limitsRedis, limitsRedis, 'redis')] : []),
    ...variants(
      'GET /v1/users/{id}',
      bareGetUser,
      getUser,
      postgres.one && { ...getUser, path: `/v1/users/${postgres.probe.id}` },
    ),
    ...pair(
      bare,
      rowi,
      'GET /v1/items/{id}/stock',
      { method: 'GET', path: `/v1/items/${stockProbe.id}/stock`, headers: accept },
      apiKey,
    ),
    bareOrders,
    apiKeyOrders,
    ordersWithReader,
    ...variants(
      'POST /v1/orders',
      bareOrders,
      { ...postOrder, orders: mix },
      postgres.one && { ...postOrder, orders: postgres.mix },
    ),
    ...driverTargets,
  ];
  const targets = allTargets.filter((target) => target.operation.includes(options.only));

  console.log(
    `load: ${tool}, ${bench.connections} connections, ${options.threads} thread(s), ${warmup} s warm-up + ${duration} s per target, ${rounds} round(s)\n`,
  );
  const samples = new Map(targets.map((target) => [target.name, []]));
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round so drift of the machine hits every target alike.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      if (warmup > 0) await load(bench, tool, target, warmup);
      samples.get(target.name).push(await measure(bench, tool, target, duration, target.alongside));
    }
  }

  const measured = targets.map((target) => ({ ...target, ...median(samples.get(target.name)) }));
  // A reader loaded alongside another target gets a row of its own, after that target's.
  const results = measured.flatMap((result) =>
    result.alongside === undefined
      ? [result]
      : [
          { ...result, alongside: undefined },
          { ...result.alongside, ...samplesFigures(result), name: `${result.name} (reader)`, alongsideOf: result.name },
        ],
  );
  printTable(results);
  const ratios = ratiosOf(results, samples);
  const authRatios = authRatiosOf(results, samples);
  const limitRatios = limitRatiosOf(results, samples);
  printRatios(rounds, ratios, authRatios, limitRatios, redis);
  const accessLines = recordAccessLines(results, samples, rounds);
  // Redis failing a call (or answering after 250 ms) makes rowi count that request in memory instead.
  const redisFellBack = limitsRedis === undefined ? [] : redisFailuresOf(limitsRedis);
  if (redisFellBack.length > 0)
    console.log(
      `warning: ${limitsRedis.name} logged ${redisFellBack.length} time(s) that Redis could not be reached (${[...new Set(redisFellBack)].join('; ')}): the request(s) then were counted in memory`,
    );
  const storageWorkers = storageTableOf(results, samples, postgres);
  printStorageTable(rounds, storageWorkers, postgres);
  const driverRatios = printDrivers(results, samples, drivers, rounds);
  // After every load: the stock ledger of each database the orders loads wrote to still balances.
  const ledgers = [];
  if (results.some((result) => result.operation === 'POST /v1/orders' && result.server === rowi))
    ledgers.push({ where: 'SQLite, the main rowi', ...(await ledgerOfSqlite(rowiData)) });
  if (
    postgres.one &&
    results.some((result) => result.operation === 'POST /v1/orders' && result.storage === 'PostgreSQL')
  )
    ledgers.push({ where: 'PostgreSQL', ...(await ledgerOfPostgres(postgres.url)) });
  const ledgerLines = ledgers.map((ledger) => ({
    verdict: ledger.differing.length === 0 ? '✓' : '✗',
    label: `stock ledger after the orders loads (${ledger.where})`,
    goal: 'balanced',
    figure:
      ledger.differing.length === 0
        ? `${ledger.items} items, ${ledger.orders} orders: movements sum to stock, reservations to placed lines`
        : ledger.differing.slice(0, 5).join('; '),
  }));
  // The batch target: 1,000 stock levels in one batch over the same 1,000 single PUTs, on the main rowi, after its loads.
  const batch = BATCH_OPERATION.includes(options.only) ? await measureBatch(rowi) : undefined;
  // The import targets: 100,000 and 1,000,000 items from CSV on SQLite (the main rowi, GET alongside) and on PostgreSQL.
  let imports;
  if (IMPORT_OPERATION.includes(options.only)) {
    if (postgres.one === undefined && postgres.skipped === 'not loaded in this run (--only)')
      postgres = await setUpPostgres(bench, options['no-postgres'], rowi, probePath, sampleOrder);
    imports = await measureImports({ sqlite: rowi, postgres: postgres.one, folder: bench.work, probePath });
  }
  // The reading targets: 100 items by ?id= over 100 single reads, and an order read with expand= over its plain read.
  const reading = READING_OPERATION.includes(options.only) ? await measureReading(rowi) : undefined;
  // Other sessions may share the machine: the figures are read beside its load.
  console.log(
    `\nload average ${loadavg()
      .map((value) => value.toFixed(2))
      .join(' ')} (1, 5, 15 min)`,
  );
  const goals = printGoals(results, ratios, authRatios, limitRatios, redis, storageWorkers, [
    ...accessLines,
    ...ledgerLines,
    ...(batch === undefined ? [] : [batchGoalLine(batch)]),
    ...(imports === undefined ? [] : importGoalLines(imports)),
    ...(reading === undefined ? [] : readingGoalLines(reading)),
    ...(start === undefined ? [] : [startGoalLine(start)]),
  ]);

  writeRecord({
    only: options.only,
    tool,
    bench,
    duration,
    rounds,
    mix,
    results,
    ratios,
    authRatios,
    recordAccess: accessLines,
    limitRatios,
    limitsOff,
    redis,
    redisFellBack,
    storageWorkers,
    postgres,
    goals,
    driverRatios,
    drivers,
    batch,
    imports,
    reading,
  });
  if (options.exports) await runExports(options['export-rows']);
  if (ledgers.some((ledger) => ledger.differing.length > 0)) process.exitCode = 1;
}

/**
 * The export bench (bench/exports.mjs) as a child of its own, after everything else: it seeds and
 * serves its own rowi and prints its targets with ✓/✗; bounded by its own time-outs and this one.
 */
async function runExports(rows) {
  console.log(`\nExports (bench/exports.mjs, ${rows} orders):`);
  const child = spawn(process.execPath, [join(ROOT, 'bench', 'exports.mjs'), '--rows', rows], {
    stdio: 'inherit',
    timeout: 30 * 60_000,
  });
  const [code] = await once(child, 'exit');
  if (code !== 0) process.exitCode = 1;
}

/** The figures of a load's reader alongside (its own rps, p50, p99), with the server's RSS and loop delay of that load. */
/**
 * What the record-access predicate costs a read: GET /v1/users/{id} by a caller that sees only its
 * own users (one more parameter of the compiled read, docs/access.md) over the same read by one
 * that sees all, same run; the target (docs/performance.md) is at least 95 %.
 */
function recordAccessLines(results, samples, rounds) {
  const own = results.find((result) => result.allRecords !== undefined);
  if (own === undefined) return [];
  const ratio = pairedRatio(samples, own.name, own.allRecords);
  const percent = `${(ratio * 100).toFixed(1)} %`;
  console.log(
    `\nrowi-own (a caller that sees only its own users) / rowi-auth (one that sees all), GET /v1/users/{id}, requests/s, same run${rounds > 1 ? ' (median of the ratios within a round)' : ''}: ${percent}`,
  );
  return [
    {
      verdict: ratio >= 0.95 ? '✓' : '✗',
      label: 'GET /v1/users/{id}, a caller that sees its own records, over one that sees all',
      goal: '>= 95.0 % of all req/s',
      figure: percent,
    },
  ];
}

function samplesFigures(result) {
  const { rps, p50, p99 } = result.alongsideFigures;
  return { rps, p50, p99, rssMb: result.rssMb, loopP99: result.loopP99, loopMax: result.loopMax };
}

/** node:sqlite (Node 24) over better-sqlite3 (Node 20), requests/s per operation, same run. */
function printDrivers(results, samples, drivers, rounds) {
  if (drivers.skipped !== undefined) {
    console.log(`\nSQLite drivers compared: skipped (${drivers.skipped})`);
    return {};
  }
  const ratios = {};
  console.log(
    `\nSQLite drivers, node:sqlite (Node ${drivers.servers[1].version}) over better-sqlite3 (Node ${drivers.servers[0].version}), requests/s, same run${rounds > 1 ? ' (median of the ratios within a round)' : ''}:`,
  );
  for (const operation of STORAGE_OPERATIONS) {
    const [older, newer] = drivers.servers.map((server) =>
      results.find((result) => result.operation === operation && result.server === server),
    );
    if (older === undefined || newer === undefined) continue;
    ratios[operation] = pairedRatio(samples, newer.name, older.name);
    console.log(
      `  ${operation}: x${ratios[operation].toFixed(2)} (${older.rps.toFixed(0)} -> ${newer.rps.toFixed(0)} req/s, p99 ${older.p99.toFixed(1)} -> ${newer.p99.toFixed(1)} ms, peak RSS ${older.rssMb.toFixed(0)} -> ${newer.rssMb.toFixed(0)} MB)`,
    );
  }
  return ratios;
}
