import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';
import { openSqliteFile, type SqliteFile } from '../helpers/sqlite-file.js';

/**
 * A database locked by another process never stops rowi from answering (SQLite). While another
 * connection holds the write lock, probes and reads are answered, and a write waits for the lock
 * without holding up the process, up to ROWI_DATABASE_TIMEOUT, then gets 503 with Retry-After and
 * stores nothing; once the lock is released, writes go through. (rowi used to wait inside SQLite,
 * on the event loop: /health/live took 9.5 s.)
 */
let test: TestApp;
let other: SqliteFile;
beforeAll(async () => {
  test = await startApp({ ROWI_DATABASE_TIMEOUT: '1500' });
  other = await openSqliteFile(test.config.data, { busyTimeoutMs: 0 });
});
afterEach(() => {
  if (other.inTransaction) other.exec('rollback');
});
afterAll(async () => {
  other.close();
  await test.close();
});

/** Resolves with the reply and the order in which replies came. */
function tracked(order: string[], name: string, request: Promise<Awaited<ReturnType<TestApp['call']>>>) {
  return request.then((reply) => {
    order.push(name);
    return reply;
  });
}

describe('another process holds the SQLite write lock', () => {
  it('GET /health/live, GET /v1/users/{id} and GET /v1/users are answered while a POST waits for the lock; the POST then gets 503 with Retry-After and stores nothing', async () => {
    const { user } = await createUser(test);
    const before = await storedUsers(test);
    other.exec('begin immediate');

    const order: string[] = [];
    const write = tracked(order, 'POST', test.call({ method: 'POST', url: '/v1/users', body: buildUser() }));
    // Give the POST time to meet the lock, then read while it waits.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const [live, one, list] = await Promise.all([
      tracked(order, 'live', test.call({ url: '/health/live', key: null })),
      tracked(order, 'one', test.call({ url: `/v1/users/${user.id}` })),
      tracked(order, 'list', test.call({ url: '/v1/users' })),
    ]);
    const refused = await write;

    expect([live.status, one.status, list.status]).toEqual([200, 200, 200]);
    expect(one.json).toEqual(user);
    expect(order.indexOf('POST'), `replies came in the order ${order.join(', ')}`).toBe(3);
    const problem = expectProblem(refused, 503, 'service-unavailable');
    expect(refused.headers['retry-after']).toBe('2');
    expect(problem.detail).toMatch(/could not take this request now/);
    other.exec('rollback');
    expect(await storedUsers(test)).toEqual(before);
  });

  it('POST /v1/users: 201 when the lock is released while it waits, within ROWI_DATABASE_TIMEOUT', async () => {
    other.exec('begin immediate');
    const write = test.call({ method: 'POST', url: '/v1/users', body: buildUser({ email: 'waited@example.com' }) });
    await new Promise((resolve) => setTimeout(resolve, 300));
    other.exec('commit');
    const reply = await write;
    expect(reply.status).toBe(201);
    expect((await storedUsers(test)).some((row) => row.email === 'waited@example.com')).toBe(true);
  });

  it('PATCH, PUT and DELETE: 503 while the lock is held, then each succeeds once it is released', async () => {
    const { user } = await createUser(test);
    other.exec('begin immediate');
    const refused = await Promise.all([
      test.call({
        method: 'PATCH',
        url: `/v1/users/${user.id}`,
        headers: { 'content-type': 'application/merge-patch+json' },
        body: '{"name":"Locked"}',
      }),
      test.call({ method: 'PUT', url: `/v1/users/${user.id}`, body: { name: 'Locked', email: user.email } }),
      test.call({ method: 'DELETE', url: `/v1/users/${user.id}` }),
    ]);
    for (const reply of refused) expectProblem(reply, 503, 'service-unavailable');
    other.exec('rollback');
    expect(
      (
        await test.call({
          method: 'PATCH',
          url: `/v1/users/${user.id}`,
          headers: { 'content-type': 'application/merge-patch+json' },
          body: '{"name":"Free"}',
        })
      ).status,
    ).toBe(200);
    expect((await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` })).status).toBe(204);
  });
});
