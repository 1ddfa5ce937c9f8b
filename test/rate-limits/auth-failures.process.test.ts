import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sendAlone, serverPool, workersThatAnswered, type RunningServer } from '../helpers/process.js';

/**
 * The failed-authentication budget (10 a minute per client address, the shipped default) holds
 * for the whole deployment, tried as an attacker would over real sockets: each guess on a new
 * connection, so that the primary of `rowi serve --workers 2` deals them to both workers in turn,
 * and guesses spread over two instances sharing Redis. Redis unreachable: each instance still
 * holds its own budget (fail safe), never none.
 */
const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;
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
  it('GET /v1/users and POST /oauth/token: 429 after the 10th wrong key or client secret when the guesses reach both workers of rowi serve --workers 2; then the right key from that address is refused too', async () => {
    const server = await serve({ args: ['--workers', '2'], env: DEFAULT_FAILURE_LIMIT, timeoutMs: START_MS });
    const answers: Answer[] = [];
    for (let n = 0; n < 6; n++) answers.push(await wrongKey(server, n));
    for (let n = 0; n < 6; n++) answers.push(await wrongSecret(server, n));
    expect(answers.map((answer) => answer.status)).toEqual([...Array(10).fill(401), 429, 429]);
    expect(workersThatAnswered(server, 401)).toEqual(new Set([1, 2]));
    expectThrottled(answers[10]!);
    expectThrottled(answers[11]!);
    // Refused before the key is looked at, on whichever worker: the attacker learns nothing more.
    for (let n = 0; n < 2; n++)
      expectThrottled(await send(server, '/v1/users', { 'x-api-key': server.adminKey, accept: 'application/json' }));
  });

  it.skipIf(REDIS_URL === undefined)(
    'GET /v1/users: 429 after the 10th wrong key spread over two instances sharing Redis, on both (not 10 each)',
    async () => {
      const env = { ...DEFAULT_FAILURE_LIMIT, ROWI_REDIS_URL: REDIS_URL! };
      const first = await serve({ env, timeoutMs: START_MS });
      const second = await serve({ env, database: first.database, adminKey: first.adminKey, timeoutMs: START_MS });
      // Both count in Redis and hear it (a start on a loaded machine may take Redis a few tries).
      for (const server of [first, second]) await untilCountedInRedis(server);
      const statuses: number[] = [];
      for (let n = 0; n < 10; n++) statuses.push((await wrongKey(n % 2 === 0 ? first : second, n)).status);
      expect(statuses).toEqual(Array(10).fill(401));
      // The 10th failure was the second's: the first heard of the block through Redis.
      expectThrottled(await wrongKey(first, 10));
      expectThrottled(await wrongKey(second, 11));
      expectThrottled(await wrongSecret(first, 12));
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
