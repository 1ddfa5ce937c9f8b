import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import Type from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { operation, representation } from '../../src/http/schemas.js';
import { createUser } from '../../src/resources/users/users.service.js';
import { call, startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';
import { BACKEND } from '../helpers/database.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';

/**
 * The handler budget (ROWI_HANDLER_TIMEOUT, 100 ms here): a request not answered in time gets a
 * 503 problem with Retry-After, and the work behind it finishes or fails whole afterwards. No
 * route of rowi is slow on demand, so a test-only route is added to the real app: a write in one
 * transaction that pauses between its two rows.
 */

const BUDGET_MS = 100;
const SLOW_MS = 400;
/** ROWI_DATABASE_TIMEOUT here: how long a write waits for SQLite's write lock. */
const LOCK_WAIT_MS = 1000;
const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

describe('the handler budget', () => {
  let test: TestApp;
  let app: FastifyInstance;
  let origin: string;
  beforeAll(async () => {
    // Load shedding off: the test blocks nothing, but a busy machine must not turn a 503 into another 503.
    test = await startApp({
      ROWI_HANDLER_TIMEOUT: String(BUDGET_MS),
      ROWI_MAX_EVENT_LOOP_DELAY: '0',
      ROWI_DATABASE_TIMEOUT: String(LOCK_WAIT_MS),
    });
    app = await buildApp({ config: test.config, storage: test.storage, logger: pino({ level: 'silent' }) });
    app.post(
      '/v1/test-slow-pair',
      {
        schema: operation({
          operationId: 'testSlowPair',
          permission: 'users:create',
          summary: 'test only: two users in one transaction, SLOW_MS apart; fails before the second when asked',
          tags: ['test'],
          body: Type.Object({ first: Type.String(), second: Type.String(), fail: Type.Boolean() }),
          response: { 201: representation(Type.Object({ created: Type.Integer() }), 'Both created') },
        }),
      },
      async (request, reply) => {
        const body = request.body as { first: string; second: string; fail: boolean };
        await app.db.transaction().execute(async (trx) => {
          await createUser(trx, buildUser({ email: body.first }));
          await pause(SLOW_MS);
          if (body.fail) throw new Error('the second half failed');
          await createUser(trx, buildUser({ email: body.second }));
        });
        return reply.code(201).send({ created: 2 });
      },
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await app?.close();
    await test?.close();
  });

  const emailsStored = async () => (await storedUsers(test)).map((user) => user.email);

  it('POST (slow handler): 503 problem with Retry-After within the budget; the transaction behind it commits whole afterwards', async () => {
    const started = performance.now();
    const reply = await call(app, {
      method: 'POST',
      url: '/v1/test-slow-pair',
      key: test.adminKey,
      body: { first: 'a1@example.com', second: 'a2@example.com', fail: false },
    });
    const elapsed = performance.now() - started;

    const problem = expectProblem(reply, 503, 'service-unavailable');
    expect(problem.detail).toContain(`${BUDGET_MS} ms`);
    expect(reply.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(elapsed).toBeGreaterThanOrEqual(BUDGET_MS - 5);
    expect(elapsed).toBeLessThan(BUDGET_MS + 250);
    // The work was not stopped: both rows, or (had it failed) neither; never one.
    await pause(SLOW_MS + 200);
    expect((await emailsStored()).filter((email) => email.startsWith('a'))).toEqual([
      'a1@example.com',
      'a2@example.com',
    ]);
  });

  it('POST (slow handler that then fails): 503 first; the transaction rolls back whole, and the late failure breaks nothing', async () => {
    const reply = await call(app, {
      method: 'POST',
      url: '/v1/test-slow-pair',
      key: test.adminKey,
      body: { first: 'b1@example.com', second: 'b2@example.com', fail: true },
    });
    expectProblem(reply, 503, 'service-unavailable');
    await pause(SLOW_MS + 200);
    expect((await emailsStored()).filter((email) => email.startsWith('b'))).toEqual([]);
    const after = await call(app, { url: '/v1/users?limit=1', key: test.adminKey });
    expect(after.status).toBe(200);
  });

  it('over a real socket: the 503 arrives within the budget, the late answer is dropped, and the kept-alive connection serves the next request', async () => {
    const headers = { 'content-type': 'application/json', 'x-api-key': test.adminKey };
    const started = performance.now();
    const slow = await fetch(`${origin}/v1/test-slow-pair`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ first: 'c1@example.com', second: 'c2@example.com', fail: false }),
    });
    const elapsed = performance.now() - started;
    expect(slow.status).toBe(503);
    expect(slow.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(slow.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(await slow.json()).toMatchObject({ type: '/problems/service-unavailable', status: 503 });
    expect(elapsed).toBeLessThan(BUDGET_MS + 250);
    await pause(SLOW_MS + 200);
    // The handler's own 201 came after the 503 and went nowhere; the connection is still good.
    const next = await fetch(`${origin}/v1/users?email=c1@example.com`, { headers });
    expect(next.status).toBe(200);
    expect(((await next.json()) as { data: unknown[] }).data).toHaveLength(1);
  });

  it('GET /v1/users: a request answered within the budget is untouched (200)', async () => {
    const reply = await call(app, { url: '/v1/users?limit=5', key: test.adminKey });
    expect(reply.status).toBe(200);
    await pause(BUDGET_MS + 50);
  });

  it.runIf(BACKEND === 'sqlite')(
    "POST /v1/users: 503 problem with Retry-After within the budget while another connection holds SQLite's write lock (the wait does not stop the process); the write, still waiting, gives up at ROWI_DATABASE_TIMEOUT and stores nothing",
    { timeout: 20_000 },
    async () => {
      const holder = await openSqliteFile(test.config.data, { busyTimeoutMs: 0 });
      holder.exec('begin immediate');
      let reply;
      let elapsed;
      try {
        const started = performance.now();
        reply = await test.call({
          method: 'POST',
          url: '/v1/users',
          body: buildUser({ email: 'locked.out@example.com' }),
        });
        elapsed = performance.now() - started;
        // Held past the database time-out, so the write behind the 503 gives up rather than commits.
        await pause(LOCK_WAIT_MS + 300);
      } finally {
        holder.exec('rollback');
        holder.close();
      }
      expectProblem(reply, 503, 'service-unavailable');
      expect(reply.headers['retry-after']).toMatch(/^[1-9]\d*$/);
      expect(elapsed).toBeLessThan(BUDGET_MS + 250);
      expect(await emailsStored()).not.toContain('locked.out@example.com');
    },
  );
});
