import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';
import { Receiver } from '../helpers/receiver.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The deployment shape of docs/operations.md, for real: three rowi instances on one PostgreSQL
 * with Redis, behind nginx (round robin). Every server here is the test's own (a PostgreSQL
 * cluster made with initdb in a temporary folder, a redis-server, nginx, on ports of their own),
 * so it may kill and restart them without touching the services other test files share. While
 * orders and reads run through nginx: one instance is killed (SIGKILL) and started again, Redis is
 * restarted, PostgreSQL is restarted. Afterwards every committed order.created event has reached a
 * webhook receiver at least once and NATS (the shared server: it is not restarted) once. Needs
 * nginx, initdb/postgres, redis-server and ROWI_TEST_NATS_URL: skips (and says why) where one is
 * missing, except with ROWI_TEST_DEPLOYMENT=required (.ci/run), where it fails.
 */
const which = (command: string) => {
  try {
    return execFileSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};
const TOOLS = {
  nginx: which('nginx'),
  initdb: which('initdb'),
  postgres: which('postgres'),
  pg_ctl: which('pg_ctl'),
  redis: which('redis-server'),
  nats: process.env.ROWI_TEST_NATS_URL ?? '',
};
const MISSING = Object.entries(TOOLS)
  .filter(([, path]) => path === '')
  .map(([name]) => name);
if (MISSING.length > 0) {
  const why = `the deployment test needs ${MISSING.join(', ')} (Debian: nginx, postgresql, redis-server; ROWI_TEST_NATS_URL)`;
  if (process.env.ROWI_TEST_DEPLOYMENT === 'required') throw new Error(`${why}, and ROWI_TEST_DEPLOYMENT=required`);
  console.warn(`[rowi tests] ${why}: SKIPPED`);
}
/** initdb and postgres refuse to run as root: then they run as the machine's postgres user. */
const AS_POSTGRES = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];

const children: ChildProcess[] = [];
const folders: string[] = [];
const instances: RunningServer[] = [];
const receiver = new Receiver();
afterAll(async () => {
  await receiver.stop();
  for (const instance of instances) instance.child.kill('SIGKILL');
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  for (const data of folders) stopPostgres(data, 'immediate');
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** pg_ctl stop: the postgres process itself (runuser cannot pass SIGKILL on). */
function stopPostgres(data: string, mode: 'fast' | 'immediate'): void {
  const argv = [...AS_POSTGRES, TOOLS.pg_ctl, '-D', data, '-m', mode, '-w', 'stop'];
  try {
    execFileSync(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  } catch {
    // Not running.
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

function run(argv: string[]): ChildProcess {
  const [command, ...args] = [...argv];
  const child = spawn(command!, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.resume();
  children.push(child);
  return child;
}

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

async function stopped(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

describe.skipIf(MISSING.length > 0)('three instances behind nginx, on one PostgreSQL with Redis', () => {
  it(
    'POST /v1/orders and GET /v1/orders/{id} through nginx while an instance is killed and restarted, Redis restarted, PostgreSQL restarted: no 500, every 201 order stored once, the ledger balances, the failed-auth budget held across instances, every order.created delivered by webhook and published to NATS once',
    { timeout: 240_000 },
    async () => {
      const folder = tempFolder('deployment');
      chmodSync(folder, 0o777);
      const [pgPort, redisPort, nginxPort, ...rowiPorts] = await Promise.all(
        Array.from({ length: 6 }, () => freePort()),
      );

      // PostgreSQL, the test's own.
      // Its own folder outside the run's (private) root, readable by the user it runs as.
      const pgData = mkdtempSync(join(tmpdir(), 'rowi-deployment-pg-'));
      folders.push(pgData);
      if (AS_POSTGRES.length > 0)
        chownSync(pgData, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), -1);
      const initdb = [
        ...AS_POSTGRES,
        TOOLS.initdb,
        '-D',
        pgData,
        '-U',
        'postgres',
        '-A',
        'trust',
        '--no-sync',
        '-E',
        'UTF8',
      ];
      execFileSync(initdb[0]!, initdb.slice(1), { stdio: 'ignore' });
      const startPostgres = () =>
        run([
          ...AS_POSTGRES,
          TOOLS.postgres,
          '-D',
          pgData,
          '-p',
          String(pgPort),
          '-k',
          pgData,
          '-c',
          'listen_addresses=127.0.0.1',
          '-c',
          'fsync=off',
        ]);
      const databaseUrl = `postgres://postgres@127.0.0.1:${pgPort}/postgres`;
      const admin = new pg.Pool({ connectionString: databaseUrl, max: 1 });
      const pgUp = () => admin.query('select 1').then(() => true);
      let postgres = startPostgres();
      await until('PostgreSQL started', pgUp, 30_000);

      // Redis, the test's own.
      const startRedis = () =>
        run([TOOLS.redis, '--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
      let redis = startRedis();

      // A webhook receiver that answers at once, and a NATS stream of this run's own.
      await receiver.start();
      const tag = `deployment${process.pid}${Date.now().toString(36)}`;
      const natsSubject = `rowitest.${tag}`;
      const natsStream = `ROWI_TEST_${tag}`.toUpperCase();

      // Three instances (one process each: the machine's cores are shared), on fixed ports for nginx.
      const env = (port: number) => ({
        ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        ROWI_NATS_URL: TOOLS.nats,
        ROWI_NATS_SUBJECT: natsSubject,
        ROWI_NATS_STREAM: natsStream,
        ROWI_PORT: String(port),
        ROWI_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        ROWI_TRUST_PROXY: '127.0.0.1',
        ROWI_PUBLIC_URL: `http://127.0.0.1:${nginxPort}`,
        ROWI_AUTH_FAILURE_LIMIT: '',
        ROWI_DATABASE_TIMEOUT: '2000',
        ROWI_DATABASE_POOL_SIZE: '4',
      });
      const database = { ROWI_DATABASE_URL: databaseUrl };
      const startInstance = (index: number, adminKey?: string) =>
        startServer({ database, env: env(rowiPorts[index]!), timeoutMs: 60_000, ...(adminKey ? { adminKey } : {}) });
      instances[0] = await startInstance(0);
      const adminKey = instances[0].adminKey;
      [instances[1], instances[2]] = await Promise.all([startInstance(1, adminKey), startInstance(2, adminKey)]);

      // nginx, round robin; a refused connection goes to the next instance.
      writeFileSync(
        join(folder, 'nginx.conf'),
        `pid ${folder}/nginx.pid;
error_log ${folder}/nginx-error.log warn;
worker_processes 1;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${folder}/body; proxy_temp_path ${folder}/proxy;
  fastcgi_temp_path ${folder}/fastcgi; uwsgi_temp_path ${folder}/uwsgi; scgi_temp_path ${folder}/scgi;
  upstream rowi {
${rowiPorts.map((port) => `    server 127.0.0.1:${port} max_fails=1 fail_timeout=2s;`).join('\n')}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://rowi;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_next_upstream error timeout;
      proxy_connect_timeout 1s;
      proxy_read_timeout 20s;
    }
  }
}
`,
      );
      run([TOOLS.nginx, '-p', folder, '-c', join(folder, 'nginx.conf'), '-g', 'daemon off;']);
      const base = `http://127.0.0.1:${nginxPort}`;
      await until('nginx answers', () => fetch(`${base}/health/live`).then((reply) => reply.ok), 10_000);

      const headers = { 'x-api-key': adminKey, 'content-type': 'application/json' };
      const post = (path: string, body: unknown, extra: Record<string, string> = {}) =>
        fetch(`${base}${path}`, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
      const user = (await (await post('/v1/users', { name: 'Buyer', email: 'buyer@example.com' })).json()) as {
        id: number;
      };
      const item = (await (await post('/v1/items', { name: 'Widget', sku: 'W-1', price: '1.00' })).json()) as {
        id: number;
      };
      expect((await post('/v1/webhook-endpoints', { url: receiver.url, events: ['order.created'] })).status).toBe(201);
      const STOCK = 1_000_000;
      expect(
        (
          await fetch(`${base}/v1/items/${item.id}/stock`, {
            method: 'PUT',
            headers,
            body: JSON.stringify({ quantity: STOCK }),
          })
        ).status,
      ).toBe(200);

      // The load: writers place orders (each retried with its Idempotency-Key until answered
      // 201, at most 20 times), readers read them back; bounded in count and in time.
      const statuses = { orders: new Map<number, number>(), reads: new Map<number, number>() };
      const count = (map: Map<number, number>, status: number) => map.set(status, (map.get(status) ?? 0) + 1);
      const placed = new Map<string, number>();
      let done = false;
      const runId = randomBytes(3).toString('hex');
      const writer = async (w: number) => {
        for (let n = 0; !done && n < 5000; n++) {
          const key = `${runId}-${w}-${n}`;
          for (let attempt = 0; attempt < 20 && !done; attempt++) {
            const reply = await post(
              '/v1/orders',
              { name: `Order ${key}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
              { 'idempotency-key': key },
            ).catch(() => undefined);
            const status = reply?.status ?? 0;
            count(statuses.orders, status);
            if (reply?.ok) {
              placed.set(key, ((await reply.json()) as { id: number }).id);
              break;
            }
            await reply?.arrayBuffer();
            await sleep(100);
          }
        }
      };
      const reader = async () => {
        for (let n = 0; !done && n < 20_000; n++) {
          const ids = [...placed.values()];
          const id = ids[Math.floor(Math.random() * ids.length)] ?? 1;
          const reply = await fetch(`${base}/v1/orders/${id}`, { headers }).catch(() => undefined);
          count(statuses.reads, reply?.status ?? 0);
          await reply?.arrayBuffer();
          if (!reply?.ok) await sleep(100);
        }
      };
      const load = [...[0, 1, 2].map(writer), reader(), reader()];

      // The faults, one after another.
      await sleep(3000);
      await stopped(instances[1]!.child, 'SIGKILL');
      await sleep(1000);
      instances[1] = await startInstance(1, adminKey);
      await sleep(2000);
      await stopped(redis, 'SIGTERM');
      await sleep(1000);
      redis = startRedis();
      await sleep(2000);
      stopPostgres(pgData, 'fast');
      await stopped(postgres, 'SIGTERM');
      await sleep(2000);
      postgres = startPostgres();
      await until('PostgreSQL back', pgUp, 30_000);
      await sleep(4000);
      done = true;
      await Promise.all(load);
      const loadEnded = Date.now();

      // The failed-authentication budget, across the three instances (one client address).
      const guesses: number[] = [];
      for (let n = 0; n < 12; n++)
        guesses.push(
          (
            await fetch(`${base}/v1/users`, {
              headers: { 'x-api-key': `rowi_wrong${n}`, 'x-forwarded-for': '203.0.113.9' },
            })
          ).status,
        );

      const orderStatuses = Object.fromEntries(statuses.orders);
      const readStatuses = Object.fromEntries(statuses.reads);
      console.info(
        `[deployment] orders: ${JSON.stringify(orderStatuses)}, reads: ${JSON.stringify(readStatuses)}, placed ${placed.size}, guesses ${guesses.join(' ')}`,
      );

      expect(statuses.orders.get(500) ?? 0).toBe(0);
      expect(statuses.reads.get(500) ?? 0).toBe(0);
      expect(placed.size).toBeGreaterThan(50);
      expect(guesses).toEqual([...Array(10).fill(401), 429, 429]);

      // Every 201 is stored once: one order per Idempotency-Key; the ledger balances.
      const { rows: orders } = await admin.query<{ id: string; name: string }>('select id, name from orders');
      const names = new Map(orders.map((row) => [Number(row.id), row.name]));
      for (const [key, id] of placed) expect(names.get(id)).toBe(`Order ${key}`);
      expect(new Set(orders.map((row) => row.name)).size).toBe(orders.length);
      const {
        rows: [stock],
      } = await admin.query<{ quantity: string; reserved: string }>(
        'select quantity, reserved from stock where item_id = $1',
        [item.id],
      );
      const {
        rows: [lines],
      } = await admin.query<{ units: string }>(
        'select coalesce(sum(quantity), 0) as units from order_lines where item_id = $1',
        [item.id],
      );
      expect(Number(stock!.reserved)).toBe(Number(lines!.units));
      expect(Number(stock!.quantity) + Number(stock!.reserved)).toBe(STOCK);

      // Every committed order.created: delivered to the receiver at least once, published to NATS
      // once (JetStream keeps one message per event id).
      const { rows: events } = await admin.query<{ id: string }>("select id from events where type = 'order.created'");
      const committed = new Set(events.map((row) => row.id));
      expect(committed.size).toBe(orders.length);
      const delivered = () => new Set(receiver.received.map((received) => received.event.id));
      await until(
        'every order.created delivered',
        async () => [...committed].every((id) => delivered().has(id)),
        60_000,
      ).catch(async (error: unknown) => {
        const missing = [...committed].filter((id) => !delivered().has(id));
        const { rows } = await admin.query('select status, count(*) as n from webhook_deliveries group by status');
        const fannedOut = await admin.query('select count(*) as n from webhook_deliveries where event_id = any($1)', [
          missing,
        ]);
        const cursors = await admin.query('select * from event_cursors');
        throw new Error(
          `${(error as Error).message}: ${missing.length} of ${committed.size} missing (${fannedOut.rows[0].n} of them fanned out); deliveries ${JSON.stringify(rows)}; cursors ${JSON.stringify(cursors.rows)}`,
        );
      });
      const nats = await connect({ servers: TOOLS.nats });
      try {
        const manager = await jetstreamManager(nats);
        await until(
          'every order.created published',
          async () => (await manager.streams.info(natsStream)).state.messages >= committed.size,
          60_000,
        );
        const total = (await manager.streams.info(natsStream)).state.messages;
        const published = new Map<string, number>();
        const consumer = await jetstream(nats).consumers.get(natsStream);
        let read = 0;
        for await (const message of await consumer.fetch({ max_messages: total, expires: 5000 })) {
          if (message.subject === `${natsSubject}.order.created`) {
            const id = message.headers?.get('Nats-Msg-Id') ?? '';
            published.set(id, (published.get(id) ?? 0) + 1);
          }
          if (++read === total) break;
        }
        console.info(
          `[deployment] ${committed.size} order.created: ${receiver.received.length} webhook requests (all seen, and published, within ${Date.now() - loadEnded} ms after the load ended), ${published.size} published to NATS`,
        );
        expect([...published.keys()].sort()).toEqual([...committed].sort());
        expect([...published.values()].every((times) => times === 1)).toBe(true);
        await manager.streams.delete(natsStream).catch(() => {});
      } finally {
        await nats.close();
      }
      await admin.end();
    },
  );
});
