// node bench/profile-one.mjs [--operation read|order] [--seconds 10] [--out DIR] [--no-profile]
//
// One rowi (SQLite, one process, the bench's settings) loaded with one operation, optionally under
// `node --cpu-prof`: what a profile of that operation alone shows, summarised by
// bench/profile-summary.mjs. For the team's measurements, not a target.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { measure } from './lib/load.mjs';
import { ORDERED_ITEMS, STOCK_PER_ITEM } from './lib/order-mix.mjs';
import { ROOT, adminKeyOf, cliOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedItems, seedUsers } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    operation: { type: 'string', default: 'read' },
    seconds: { type: 'string', default: '10' },
    out: { type: 'string', default: join(tmpdir(), 'rowi-profile') },
    'no-profile': { type: 'boolean', default: false },
    // Another build's dist/ folder to run.
    dist: { type: 'string', default: join(ROOT, 'dist') },
    // Signal the server once the seed is done (e.g. SIGUSR2) and again after the load.
    signal: { type: 'string' },
    // More options for node, e.g. --trace-gc.
    'node-args': { type: 'string', default: '' },
  },
});
const keep = process.env.BENCH_KEEP_WORK === '1';
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-prof-')), children: new Set(), threads: 1, connections: 64 };
const profiling = !options['no-profile'];
try {
  const serve = [cliOf(options.dist), 'serve'];
  const extra = options['node-args'].split(' ').filter(Boolean);
  const args = [...extra, ...(profiling ? ['--cpu-prof', `--cpu-prof-dir=${options.out}`] : []), ...serve];
  const server = await startRowi(bench, 'rowi', sqliteEnv(join(bench.work, 'rowi.db'), 1), args);
  const key = await adminKeyOf(server);
  server.headers = { accept: 'application/json', 'x-api-key': key };
  server.credentials = async () => ({ 'x-api-key': key });
  const users = await seedUsers(server, 200);
  const items = await seedItems(server, ORDERED_ITEMS, STOCK_PER_ITEM);
  const target =
    options.operation === 'read'
      ? { server, method: 'GET', path: `/v1/users/${users[100].id}`, headers: server.headers }
      : {
          server,
          method: 'POST',
          path: '/v1/orders',
          headers: { ...server.headers, 'content-type': 'application/json' },
          orders: { userId: users[0].id, itemIds: items.map((item) => item.id), maxLines: 3 },
        };
  if (options.signal) server.child.kill(options.signal);
  const run = await measure(bench, 'wrk', target, Number(options.seconds));
  console.log(
    `${options.operation}: ${Math.round(run.rps)} req/s p99 ${run.p99.toFixed(1)} ms CPU ${run.cpuMs.toFixed(3)} ms/request RSS ${run.rssMb.toFixed(0)} MB`,
  );
  if (options.signal) {
    server.child.kill(options.signal);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (profiling) {
    server.child.kill('SIGINT');
    await new Promise((resolve) => server.child.once('exit', resolve));
    console.log(
      'profiles:',
      readdirSync(options.out)
        .map((file) => join(options.out, file))
        .join(' '),
    );
  }
} finally {
  await stopServers(bench);
  if (keep) console.log('work folder kept:', bench.work);
  else rmSync(bench.work, { recursive: true, force: true });
}
