import { afterEach, describe, expect, it } from 'vitest';
import { serverPool, type RunningServer } from '../helpers/process.js';

/**
 * Rate limits over real sockets against `rowi serve` (the built CLI): one caller over its budget
 * while another is not, the headers counting down, and, with Redis, two processes on one
 * database spending from one budget.
 */

const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;
const { serve, killAll } = serverPool();
afterEach(killAll);

async function get(
  server: RunningServer,
  key: string,
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const reply = await fetch(`${server.baseUrl}/v1/users`, {
    headers: { 'x-api-key': key, accept: 'application/json' },
  });
  return { status: reply.status, headers: reply.headers, body: (await reply.json()) as Record<string, unknown> };
}

async function newCaller(server: RunningServer, name: string): Promise<string> {
  const admin = { 'x-api-key': server.adminKey, 'content-type': 'application/json' };
  const caller = await fetch(`${server.baseUrl}/v1/callers`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ name, role: 'editor' }),
  });
  expect(caller.status).toBe(201);
  const { id } = (await caller.json()) as { id: number };
  const key = await fetch(`${server.baseUrl}/v1/callers/${id}/keys`, { method: 'POST', headers: admin, body: '{}' });
  expect(key.status).toBe(201);
  return ((await key.json()) as { key: string }).key;
}

describe('rate limits over a real socket', () => {
  it('one caller spends its 6 a minute and gets 429 with Retry-After 10 while another caller, at the same time, gets 200 throughout; RateLimit counts down', async () => {
    const server = await serve({ env: { ROWI_RATE_LIMIT_EDITOR: '6', ROWI_RATE_LIMIT_ADMIN: '1000' } });
    const busy = await newCaller(server, 'busy');
    const calm = await newCaller(server, 'calm');
    const busyReplies = [];
    const calmReplies = [];
    for (let index = 0; index < 8; index++) {
      const [mine, theirs] = await Promise.all([get(server, busy), get(server, calm)]);
      busyReplies.push(mine);
      if (index < 5) calmReplies.push(theirs);
    }
    expect(busyReplies.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200, 200, 429, 429]);
    expect(busyReplies.slice(0, 6).map((reply) => /r=(\d+)/.exec(reply.headers.get('ratelimit') ?? '')?.[1])).toEqual([
      '5',
      '4',
      '3',
      '2',
      '1',
      '0',
    ]);
    expect(busyReplies[0]!.headers.get('ratelimit-policy')).toBe('"caller";q=6;w=60');
    const refused = busyReplies[6]!;
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.body).toMatchObject({
      type: '/problems/rate-limited',
      status: 429,
      policy: 'caller',
      quota: 6,
      window_seconds: 60,
    });
    // 6 a minute: the next request is allowed 10 s after the one before the refusal was spent.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(9);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(calmReplies.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200]);
  });

  it.skipIf(REDIS_URL === undefined)(
    'with ROWI_REDIS_URL, two processes on one database share one budget: together they allow 10 of 40, not 10 each',
    async () => {
      const limits = { ROWI_REDIS_URL: REDIS_URL!, ROWI_RATE_LIMIT_EDITOR: '10', ROWI_RATE_LIMIT_ADMIN: '1000' };
      const first = await serve({ env: limits });
      const second = await serve({ database: first.database, adminKey: first.adminKey, env: limits });
      const key = await newCaller(first, 'shared');
      const statuses = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          get(index % 2 === 0 ? first : second, key).then((reply) => reply.status),
        ),
      );
      expect(statuses.filter((status) => status === 200)).toHaveLength(10);
      expect(statuses.filter((status) => status === 429)).toHaveLength(30);
    },
  );
});
