import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { openStorage } from '../../src/db/connect.js';
import { call, callFrom, startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * Per-caller rate limits (docs/limits.md): GCRA buckets per caller (per address without
 * credentials), RateLimit-Policy and RateLimit headers on every counted response, 429 problems
 * with Retry-After, a tighter budget for POST /v1/orders, per-caller overrides, failed
 * authentications throttled per address, and counters shared through Redis.
 */

const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;

const apps: TestApp[] = [];
const proxies: TcpProxy[] = [];
async function app(settings: Record<string, string>): Promise<TestApp> {
  const started = await startApp(settings);
  apps.push(started);
  return started;
}
afterEach(async () => {
  for (const started of apps.splice(0)) await started.close();
  for (const proxy of proxies.splice(0)) await proxy.close();
});

/** The numbers of one policy in a RateLimit header: "name";r=<remaining>;t=<reset>. */
function standing(reply: Reply, policy: string): { remaining: number; reset: number } {
  const header = String(reply.headers.ratelimit ?? '');
  const match = new RegExp(`"${policy}";r=(\\d+);t=(\\d+)`).exec(header);
  if (!match) throw new Error(`no ${policy} in RateLimit: ${header}`);
  return { remaining: Number(match[1]), reset: Number(match[2]) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('per-caller rate limits', () => {
  it('a caller over its budget gets 429 with Retry-After and a problem naming the policy, while another caller is unaffected; headers count down; the bucket refills', async () => {
    const test = await app({ ROWI_RATE_LIMIT_EDITOR: '120', ROWI_RATE_LIMIT_ADMIN: '100000' });
    const busy = await createCallerWithKey(test, { role: 'editor' });
    const other = await createCallerWithKey(test, { role: 'editor' });

    const first = await test.call({ url: '/v1/users', key: busy.key });
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe('"caller";q=120;w=60');
    expect(standing(first, 'caller').remaining).toBe(119);
    const second = await test.call({ url: '/v1/users', key: busy.key });
    expect(standing(second, 'caller').remaining).toBeLessThanOrEqual(118);

    // 120 per minute is one every 500 ms, with the whole quota available at once.
    let refused: Reply | undefined;
    let allowed = 2;
    for (let index = 0; index < 400 && refused === undefined; index++) {
      const reply = await test.call({ url: '/v1/users', key: busy.key });
      if (reply.status === 429) refused = reply;
      else allowed++;
    }
    expect(refused).toBeDefined();
    expect(allowed).toBeGreaterThanOrEqual(120);
    const problem = expectProblem(refused!, 429, 'rate-limited');
    expect(problem).toMatchObject({ policy: 'caller', quota: 120, window_seconds: 60 });
    expect(refused!.headers['retry-after']).toBe('1');
    expect(standing(refused!, 'caller').remaining).toBe(0);

    // A write over the budget is refused before its body is read: nothing is stored.
    const usersBefore = await storedUsers(test);
    const write = await test.call({
      method: 'POST',
      url: '/v1/users',
      key: busy.key,
      body: { name: 'Too Many', email: 'too.many@example.com' },
    });
    expect(expectProblem(write, 429, 'rate-limited').policy).toBe('caller');
    expect(await storedUsers(test)).toEqual(usersBefore);

    // Another caller at the same moment: its own budget.
    const unaffected = await test.call({ url: '/v1/users', key: other.key });
    expect(unaffected.status).toBe(200);
    expect(standing(unaffected, 'caller').remaining).toBe(119);

    // After Retry-After, one more request is allowed: the bucket refills.
    await sleep(1000);
    expect((await test.call({ url: '/v1/users', key: busy.key })).status).toBe(200);
  });

  it('without credentials, requests are counted per client address ("address" policy); another address has its own budget; health probes are never counted', async () => {
    const test = await app({ ROWI_RATE_LIMIT_ANONYMOUS: '3' });
    const replies = [];
    for (let index = 0; index < 4; index++) replies.push(await callFrom(test, '10.1.1.1', { url: '/v1' }));
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200, 429]);
    expect(replies[0]!.headers['ratelimit-policy']).toBe('"address";q=3;w=60');
    expect(replies.slice(0, 3).map((reply) => standing(reply, 'address').remaining)).toEqual([2, 1, 0]);
    expect(expectProblem(replies[3]!, 429, 'rate-limited').policy).toBe('address');
    expect((await callFrom(test, '10.1.1.2', { url: '/v1' })).status).toBe(200);
    for (let index = 0; index < 5; index++) {
      const probe = await callFrom(test, '10.1.1.1', { url: '/health/live' });
      expect(probe.status).toBe(200);
      expect(probe.headers.ratelimit).toBeUndefined();
    }
  });

  it('POST /v1/orders also spends from the tighter "orders-create" budget; reads go on', async () => {
    const test = await app({ ROWI_RATE_LIMIT_ADMIN: '1000', ROWI_RATE_LIMIT_ORDERS_CREATE: '2' });
    const user = await test.call({
      method: 'POST',
      url: '/v1/users',
      body: { name: 'Buyer', email: 'buyer@example.com' },
    });
    const item = await test.call({
      method: 'POST',
      url: '/v1/items',
      body: { name: 'Pen', sku: 'PEN-1', price: '1.00' },
    });
    await test.call({ method: 'PUT', url: `/v1/items/${item.json.id}/stock`, body: { quantity: 10 } });
    const order = { name: 'SO', user_id: user.json.id, lines: [{ item_id: item.json.id, quantity: 1 }] };
    const placed = [];
    for (let index = 0; index < 3; index++)
      placed.push(await test.call({ method: 'POST', url: '/v1/orders', body: order }));
    expect(placed.map((reply) => reply.status)).toEqual([201, 201, 429]);
    expect(placed[0]!.headers['ratelimit-policy']).toBe('"caller";q=1000;w=60, "orders-create";q=2;w=60');
    expect(standing(placed[1]!, 'orders-create').remaining).toBe(0);
    expect(expectProblem(placed[2]!, 429, 'rate-limited')).toMatchObject({ policy: 'orders-create', quota: 2 });
    // Nothing was stored for the refused order, and reads are not held back.
    expect((await test.storage.db.selectFrom('orders').select('id').execute()).length).toBe(2);
    expect((await test.call({ url: '/v1/orders' })).status).toBe(200);
  });

  it("a caller's own rate_limit wins over its role's; PATCH rate_limit null gives the role's back", async () => {
    const test = await app({ ROWI_RATE_LIMIT_READER: '1000', ROWI_RATE_LIMIT_ADMIN: '100000' });
    const created = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'slow-system', role: 'reader', rate_limit: 2 },
    });
    expect(created.status).toBe(201);
    expect(created.json.rate_limit).toBe(2);
    const key = (await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} })).json
      .key as string;
    const statuses = [];
    for (let index = 0; index < 3; index++) statuses.push((await test.call({ url: '/v1/users', key })).status);
    expect(statuses).toEqual([200, 200, 429]);
    const limits = await test.call({ url: '/v1/limits', key });
    expect(limits.json.rate_limit).toEqual({ policy: 'caller', quota: 2, window_seconds: 60 });

    const patched = await test.call({
      method: 'PATCH',
      url: `/v1/callers/${created.json.id}`,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ rate_limit: null }),
    });
    expect(patched.status).toBe(200);
    expect(patched.json.rate_limit).toBeNull();
    // The bucket keeps what was spent: at 1000 a minute the debt of the old budget is gone in 60 ms.
    await sleep(100);
    const after = await test.call({ url: '/v1/users', key });
    expect(after.status).toBe(200);
    expect(after.headers['ratelimit-policy']).toBe('"caller";q=1000;w=60');
  });

  it("GET /v1/limits lists the caller's budgets, the body limit, the page size cap, what it may upload and have waiting to import, and the time-outs; without credentials, the address's", async () => {
    const test = await app({
      ROWI_RATE_LIMIT_ANONYMOUS: '30',
      ROWI_RATE_LIMIT_ADMIN: '900',
      ROWI_RATE_LIMIT_ORDERS_CREATE: '50',
      ROWI_AUTH_FAILURE_LIMIT: '7',
      ROWI_BODY_LIMIT: '65536',
      ROWI_IMPORT_QUEUE_MAX: '4',
      ROWI_IMPORT_QUEUE_BYTES: '0',
    });
    const mine = await test.call({ url: '/v1/limits' });
    expect(mine.status).toBe(200);
    expect(mine.json).toEqual({
      rate_limit: { policy: 'caller', quota: 900, window_seconds: 60 },
      orders_create: { policy: 'orders-create', quota: 50, window_seconds: 60 },
      failed_authentication: { policy: 'failed-auth', quota: 7, window_seconds: 60 },
      counted: 'instance',
      body_limit_bytes: 65536,
      page_size_max: 500,
      imports: { file_bytes_max: 1073741824, running_max: 1, queued_max: 4, queued_bytes_max: null },
      timeouts_ms: { headers: 10000, request: 30000, keep_alive: 72000, handler: 15000, database: 5000 },
    });
    const anonymous = await test.call({ url: '/v1/limits', key: null });
    expect(anonymous.json).toMatchObject({
      rate_limit: { policy: 'address', quota: 30, window_seconds: 60 },
      orders_create: null,
    });
    expectProblem(
      await test.call({ url: '/v1/limits', key: 'rowi_00000000_notakeynotakeynotakeynotakeynotakeynotakey0' }),
      401,
      'invalid-credentials',
    );
  });

  it('0 means unlimited: no RateLimit headers, never a 429', async () => {
    const test = await app({ ROWI_RATE_LIMIT_ADMIN: '0', ROWI_RATE_LIMIT_ORDERS_CREATE: '0' });
    for (let index = 0; index < 50; index++) {
      const reply = await test.call({ url: '/v1/users' });
      expect(reply.status).toBe(200);
      expect(reply.headers.ratelimit).toBeUndefined();
    }
    expect((await test.call({ url: '/v1/limits' })).json.rate_limit).toBeNull();
  });
});

describe('failed authentication, per address', () => {
  it('repeated invalid keys from one address are slowed, then refused with 429; a valid caller from another address is not affected', async () => {
    const test = await app({ ROWI_AUTH_FAILURE_LIMIT: '4', ROWI_RATE_LIMIT_ADMIN: '100000' });
    const bad = { 'x-api-key': 'rowi_abcdefgh_notakeynotakeynotakeynotakeynotakeynotakey0' };
    const timings: number[] = [];
    const statuses: number[] = [];
    for (let index = 0; index < 6; index++) {
      const started = performance.now();
      statuses.push((await callFrom(test, '10.9.9.9', { url: '/v1/users', headers: bad })).status);
      timings.push(performance.now() - started);
    }
    expect(statuses.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(statuses.slice(4)).toEqual([429, 429]);
    // Past half the budget, each 401 is held back.
    expect(timings[3]).toBeGreaterThanOrEqual(200);
    expect(timings[0]).toBeLessThan(200);
    const usersBefore = await storedUsers(test);
    const refused = await callFrom(test, '10.9.9.9', {
      method: 'POST',
      url: '/v1/users',
      headers: { ...bad, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'Guess', email: 'guess@example.com' }),
    });
    expect(expectProblem(refused, 429, 'rate-limited').policy).toBe('failed-auth');
    expect(await storedUsers(test)).toEqual(usersBefore);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    // The admin's valid key from another address works; so does a request without credentials from the throttled one.
    expect(
      (await callFrom(test, '10.7.7.7', { url: '/v1/users', headers: { 'x-api-key': test.adminKey } })).status,
    ).toBe(200);
    expect((await callFrom(test, '10.9.9.9', { url: '/v1' })).status).toBe(200);
  });
});

describe('failed authentication, every way of presenting a credential', () => {
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const WRONG_KEY = 'rowi_abcdefgh_notakeynotakeynotakeynotakeynotakeynotakey0';
  const tokenWithForm = (test: TestApp, address: string, secret: string) =>
    callFrom(test, address, {
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      payload: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'admin',
        client_secret: secret,
      }).toString(),
    });

  it('POST /oauth/token: a wrong client_secret in the form (client_secret_post) spends the budget: 401 four times, then 429 with the right secret too until it is proven valid (from the address, and for the client it names from any address); once it has authenticated a request, 200', async () => {
    const test = await app({
      ROWI_AUTH_FAILURE_LIMIT: '4',
      ROWI_RATE_LIMIT_ANONYMOUS: '0',
      ROWI_RATE_LIMIT_ADMIN: '100000',
    });
    const statuses = [];
    for (let index = 0; index < 4; index++) statuses.push((await tokenWithForm(test, '10.8.8.8', WRONG_KEY)).status);
    expect(statuses).toEqual([401, 401, 401, 401]);
    const refused = await tokenWithForm(test, '10.8.8.8', test.adminKey);
    expect(expectProblem(refused, 429, 'rate-limited').policy).toBe('failed-auth');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // The guesses named the client "admin": from another address too, until its secret is proven.
    const elsewhere = await tokenWithForm(test, '10.8.8.9', test.adminKey);
    expect(expectProblem(elsewhere, 429, 'rate-limited').detail).toMatch(/named this client/);
    expect(
      (await callFrom(test, '10.8.8.9', { url: '/v1/users', headers: { 'x-api-key': test.adminKey } })).status,
    ).toBe(200);
    expect((await tokenWithForm(test, '10.8.8.8', test.adminKey)).status).toBe(200);
    expect((await tokenWithForm(test, '10.8.8.9', test.adminKey)).status).toBe(200);
  });

  it('X-API-Key, Bearer, HTTP Basic and form fields spend one budget per address: the fifth failure, whichever way, is 429', async () => {
    const test = await app({
      ROWI_AUTH_FAILURE_LIMIT: '4',
      ROWI_RATE_LIMIT_ANONYMOUS: '0',
      ROWI_RATE_LIMIT_ADMIN: '100000',
    });
    const address = '10.6.6.6';
    const basic = `Basic ${Buffer.from(`admin:${WRONG_KEY}`).toString('base64')}`;
    const failures = [
      await callFrom(test, address, { url: '/v1/users', headers: { 'x-api-key': WRONG_KEY } }),
      await callFrom(test, address, { url: '/v1/users', headers: { authorization: 'Bearer not.a.token' } }),
      await callFrom(test, address, {
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, authorization: basic },
        payload: 'grant_type=client_credentials',
      }),
      await tokenWithForm(test, address, WRONG_KEY),
    ];
    expect(failures.map((reply) => reply.status)).toEqual([401, 401, 401, 401]);
    for (const next of [
      () => tokenWithForm(test, address, WRONG_KEY),
      () => callFrom(test, address, { url: '/v1/users', headers: { 'x-api-key': test.adminKey } }),
      () =>
        callFrom(test, address, {
          method: 'POST',
          url: '/oauth/token',
          headers: { ...FORM, authorization: basic },
          payload: 'grant_type=client_credentials',
        }),
    ]) {
      expect(expectProblem(await next(), 429, 'rate-limited').policy).toBe('failed-auth');
    }
  });

  it('ROWI_AUTH_FAILURE_LIMIT=0: the policy is off: 30 wrong keys and 30 wrong form secrets from one address are each 401, none held back or refused; /v1/limits says null', async () => {
    const test = await app({
      ROWI_AUTH_FAILURE_LIMIT: '0',
      ROWI_RATE_LIMIT_ANONYMOUS: '0',
      ROWI_RATE_LIMIT_ADMIN: '100000',
    });
    const started = performance.now();
    const statuses = new Set<number>();
    for (let index = 0; index < 30; index++) {
      statuses.add(
        (await callFrom(test, '10.5.5.5', { url: '/v1/users', headers: { 'x-api-key': WRONG_KEY } })).status,
      );
      statuses.add((await tokenWithForm(test, '10.5.5.5', WRONG_KEY)).status);
    }
    expect([...statuses]).toEqual([401]);
    // None held back (250 ms each past half a budget).
    expect(performance.now() - started).toBeLessThan(3000);
    expect((await test.call({ url: '/v1/limits' })).json.failed_authentication).toBeNull();
  });
});

describe.skipIf(REDIS_URL === undefined)('counters in Redis (ROWI_REDIS_URL)', () => {
  it('two instances on one database share one budget: the requests they allow together stay within the policy', async () => {
    const first = await app({
      ROWI_REDIS_URL: REDIS_URL!,
      ROWI_RATE_LIMIT_EDITOR: '10',
      ROWI_RATE_LIMIT_ADMIN: '100000',
    });
    // A second instance on the same database (and Redis).
    const storage = await openStorage(first.config, pino({ level: 'silent' }));
    const second = await buildApp({ config: first.config, storage, logger: pino({ level: 'silent' }) });
    try {
      await second.ready();
      const { key } = await createCallerWithKey(first, { role: 'editor' });
      const statuses = [];
      for (let index = 0; index < 30; index++)
        statuses.push(
          (index % 2 === 0
            ? await first.call({ url: '/v1/users', key })
            : await call(second, { url: '/v1/users', key })
          ).status,
        );
      // 10 per minute: one more every 6 s, so within these few hundred milliseconds exactly 10 pass.
      expect(statuses.filter((status) => status === 200)).toHaveLength(10);
      expect(statuses.filter((status) => status === 429)).toHaveLength(20);
      // Both instances allowed some: the budget was spent jointly, not per instance.
      expect(statuses.filter((status, index) => status === 200 && index % 2 === 1).length).toBeGreaterThan(0);
      expect((await first.call({ url: '/v1/limits' })).json.counted).toBe('redis');
      expect((await first.call({ url: '/health/ready', key: null })).json.checks.rate_limits).toMatchObject({
        status: 'pass',
      });
    } finally {
      await second.close();
      await storage.close();
    }
  });

  it('Redis stopped mid-test: requests keep being served, counted per instance, and readiness says so; when Redis is back, counting is shared again', async () => {
    const target = new URL(REDIS_URL!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    proxies.push(proxy);
    const test = await app({ ROWI_REDIS_URL: `redis://127.0.0.1:${proxy.port}`, ROWI_RATE_LIMIT_ADMIN: '100000' });
    expect((await test.call({ url: '/v1/users' })).status).toBe(200);
    // Shared once the connection that hears other instances' blocks is ready too: on a loaded
    // machine that can be a moment after the app answers its first request.
    let sharedAtStart = '';
    for (let attempt = 0; attempt < 50 && sharedAtStart !== 'redis'; attempt++) {
      sharedAtStart = (await test.call({ url: '/v1/limits' })).json.counted;
      if (sharedAtStart !== 'redis') await sleep(100);
    }
    expect(sharedAtStart).toBe('redis');

    await proxy.stop();
    const started = performance.now();
    for (let index = 0; index < 20; index++) {
      const reply = await test.call({ url: '/v1/users' });
      expect(reply.status).toBe(200);
      expect(reply.headers['ratelimit-policy']).toBe('"caller";q=100000;w=60');
    }
    // Never a wait on Redis beyond its command time-out: 20 requests well within seconds.
    expect(performance.now() - started).toBeLessThan(6000);
    const ready = await test.call({ url: '/health/ready', key: null });
    expect(ready.status).toBe(200);
    expect(ready.json.checks.rate_limits).toMatchObject({ status: 'warn' });
    expect((await test.call({ url: '/v1/limits' })).json.counted).toBe('instance (Redis unreachable)');

    await proxy.start();
    let counted = '';
    for (let attempt = 0; attempt < 50 && counted !== 'redis'; attempt++) {
      await sleep(100);
      counted = (await test.call({ url: '/v1/limits' })).json.counted;
    }
    expect(counted).toBe('redis');
  });
});
