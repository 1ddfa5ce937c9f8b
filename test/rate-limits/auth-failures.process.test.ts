import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sendAlone, serverPool, workersThatAnswered, type RunningServer } from '../helpers/process.js';

/**
 * The failed-authentication budget (10 a minute per client address and per key or client a guess
 * names, the shipped default) holds for the whole deployment, tried as an attacker would over real
 * sockets: each guess on a new connection, so that the primary of `rowi serve --workers 2` deals
 * them to both workers in turn, and guesses spread over two instances sharing Redis; a credential
 * proven valid by one process is served by the others from an address over its budget. Redis
 * unreachable: each instance still holds its own budget (fail safe), never none.
 */
const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const { serve, killAll } = serverPool();
afterEach(killAll);

/** A start may be slow on a loaded machine (workers: several processes each build an app). */
const START_MS = 60_000;
/** The shipped default of ROWI_AUTH_FAILURE_LIMIT (the test helper's own is off), and all else unlimited. */
const DEFAULT_FAILURE_LIMIT = { ROWI_AUTH_FAILURE_LIMIT: '' };

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: Record<string, unknown>;
}

/** One request on a connection of its own, its JSON answer. */
async function send(
  server: RunningServer,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  const reply = await sendAlone(server, body === undefined ? 'GET' : 'POST', path, headers, body);
  return {
    status: reply.status,
    retryAfter: reply.headers['retry-after'],
    body: reply.text === '' ? {} : (JSON.parse(reply.text) as Record<string, unknown>),
  };
}

const wrongKey = (server: RunningServer, n: number) =>
  send(server, '/v1/users', { 'x-api-key': `rowi_${'x'.repeat(20)}${n}`, accept: 'application/json' });

const wrongSecret = (server: RunningServer, n: number) =>
  send(
    server,
    '/oauth/token',
    { 'content-type': 'application/x-www-form-urlencoded' },
    new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'admin',
      client_secret: `wrong-${n}`,
    }).toString(),
  );

function expectThrottled(answer: Answer): void {
  expect(answer.status).toBe(429);
  expect(answer.body).toMatchObject({ type: '/problems/rate-limited', policy: 'failed-auth', quota: 10 });
  expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number(answer.retryAfter)).toBeLessThanOrEqual(6);
}

const limitsOf = (server: RunningServer) =>
  fetch(`${server.baseUrl}/v1/limits`).then((reply) => reply.json() as Promise<{ counted: string }>);

async function untilCountedInRedis(server: RunningServer): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if ((await limitsOf(server)).counted === 'redis') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect((await limitsOf(server)).counted).toBe('redis');
}

/** A port nothing listens on: Redis "down" from the first moment. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('failed authentication, counted for the whole deployment', { timeout: 2 * START_MS }, () => {
  it('GET /v1/users and POST /oauth/token: 429 after the 10th wrong key or client secret when the guesses reach both workers of rowi serve --workers 2; the right key, proven on one worker before, is served from that address by both', async () => {
    const server = await serve({ args: ['--workers', '2'], env: DEFAULT_FAILURE_LIMIT, timeoutMs: START_MS });
    const rightKey = () => send(server, '/v1/users', { 'x-api-key': server.adminKey, accept: 'application/json' });
    expect((await rightKey()).status).toBe(200);
    await pause(200);
    const provedBy = workersThatAnswered(server, 200, 'GET /v1/users');
    expect(provedBy.size).toBe(1);
    const answers: Answer[] = [];
    for (let n = 0; n < 6; n++) answers.push(await wrongKey(server, n));
    for (let n = 0; n < 6; n++) answers.push(await wrongSecret(server, n));
    expect(answers.map((answer) => answer.status)).toEqual([...Array(10).fill(401), 429, 429]);
    expect(workersThatAnswered(server, 401)).toEqual(new Set([1, 2]));
    expectThrottled(answers[10]!);
    expectThrottled(answers[11]!);
    // Wrong keys are refused before they are looked at; the right one, proven by one worker, is served by both.
    expectThrottled(await wrongKey(server, 12));
    for (let n = 0; n < 4; n++) expect((await rightKey()).status).toBe(200);
    await pause(200);
    expect(workersThatAnswered(server, 200, 'GET /v1/users')).toEqual(new Set([1, 2]));
  });

  it("GET /v1/users: guesses at one key's secret, each from an address of its own (X-Forwarded-For) and dealt to both workers, are 429 after the 10th; the key itself is served from a new address", async () => {
    const server = await serve({
      args: ['--workers', '2'],
      env: { ...DEFAULT_FAILURE_LIMIT, ROWI_TRUST_PROXY: '127.0.0.1' },
      timeoutMs: START_MS,
    });
    const from = (address: string, key: string) =>
      send(server, '/v1/users', { 'x-api-key': key, 'x-forwarded-for': address, accept: 'application/json' });
    expect((await from('192.0.2.200', server.adminKey)).status).toBe(200);
    const guess = (n: number) => `${server.adminKey.slice(0, 14)}${String(n).padStart(43, 'g')}`;
    const statuses: number[] = [];
    for (let n = 0; n < 11; n++) statuses.push((await from(`192.0.2.${n + 1}`, guess(n))).status);
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
    expect(workersThatAnswered(server, 401)).toEqual(new Set([1, 2]));
    const refused = await from('192.0.2.99', guess(99));
    expectThrottled(refused);
    expect(refused.body.detail).toMatch(/named this API key/);
    expect((await from('192.0.2.98', server.adminKey)).status).toBe(200);
  });

  it.skipIf(REDIS_URL === undefined)(
    'GET /v1/users: 429 after the 10th wrong key spread over two instances sharing Redis, on both (not 10 each); the right key, proven on one, is served by the other',
    async () => {
      const env = { ...DEFAULT_FAILURE_LIMIT, ROWI_REDIS_URL: REDIS_URL! };
      const first = await serve({ env, timeoutMs: START_MS });
      const second = await serve({ env, database: first.database, adminKey: first.adminKey, timeoutMs: START_MS });
      // Both count in Redis and hear it (a start on a loaded machine may take Redis a few tries).
      for (const server of [first, second]) await untilCountedInRedis(server);
      // The right key is proven on the first instance only.
      const rightKey = (server: RunningServer) =>
        send(server, '/v1/users', { 'x-api-key': server.adminKey, accept: 'application/json' });
      expect((await rightKey(first)).status).toBe(200);
      const statuses: number[] = [];
      for (let n = 0; n < 10; n++) statuses.push((await wrongKey(n % 2 === 0 ? first : second, n)).status);
      expect(statuses).toEqual(Array(10).fill(401));
      // The 10th failure was the second's: the first heard of the block through Redis.
      expectThrottled(await wrongKey(first, 10));
      expectThrottled(await wrongKey(second, 11));
      expectThrottled(await wrongSecret(first, 12));
      // The second heard of the proof through Redis: it serves the right key from the address refused.
      expect((await rightKey(second)).status).toBe(200);
    },
  );

  it("GET /v1/users: with Redis unreachable, rowi serve --workers 2 still answers 429 after the 10th wrong key (fail safe: the budget is the instance's); /v1/limits says it counts alone", async () => {
    const server = await serve({
      args: ['--workers', '2'],
      timeoutMs: START_MS,
      env: { ...DEFAULT_FAILURE_LIMIT, ROWI_REDIS_URL: `redis://127.0.0.1:${await closedPort()}` },
    });
    const statuses: number[] = [];
    for (let n = 0; n < 12; n++) statuses.push((await wrongKey(server, n)).status);
    expect(statuses).toEqual([...Array(10).fill(401), 429, 429]);
    const limits = await fetch(`${server.baseUrl}/v1/limits`).then(
      (reply) => reply.json() as Promise<{ counted: string }>,
    );
    expect(limits.counted).toBe('instance (Redis unreachable)');
  });
});
