import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { openStorage } from '../../src/db/connect.js';
import { call, startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
  test.call({
    method: 'POST',
    url: '/v1/users',
    headers: { ...(key === undefined ? {} : { 'idempotency-key': key }), ...headers },
    body,
  });

describe('Idempotency-Key on POST', () => {
  it('POST /v1/users: a retry with the same key and body replays the first response and creates nothing', async () => {
    const body = buildUser();
    const first = await post('key-replay-1', body);
    const before = await storedUsers(test);

    const retry = await post('key-replay-1', body);

    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.json).toEqual(first.json);
    expect(retry.headers.location).toBe(first.headers.location);
    expect(retry.headers.etag).toBe(first.headers.etag);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(await storedUsers(test)).toEqual(before);
  });

  it('POST /v1/users: the replay is the first response even after the record changed', async () => {
    const body = buildUser({ name: 'Original' });
    const first = await post('key-replay-2', body);
    await test.call({ method: 'PATCH', url: `/v1/users/${first.json.id}`, body: { name: 'Renamed later' } });
    const retry = await post('key-replay-2', body);
    expect(retry.json.name).toBe('Original');
  });

  it('POST /v1/users: the same data sent as XML is the same request (replayed, rendered as XML when asked)', async () => {
    const body = buildUser();
    const first = await post('key-xml-1', body);
    const retry = await post('key-xml-1', `<user><name>${body.name}</name><email>${body.email}</email></user>`, {
      'content-type': 'application/xml',
      accept: 'application/xml',
    });
    expect(retry.status).toBe(201);
    expect(retry.mediaType).toBe('application/xml');
    expect(retry.text).toContain(`<id>${first.json.id}</id>`);
    expect(retry.headers.etag).toBe('"v1-xml"');
  });

  it('POST /v1/users: 422 idempotency-key-reused when the key comes back with another body, and nothing is stored', async () => {
    await post('key-reused-1', buildUser());
    const before = await storedUsers(test);
    const reply = await post('key-reused-1', buildUser());
    const problem = expectProblem(reply, 422, 'idempotency-key-reused');
    expect(problem.errors).toEqual([
      { in: 'header', pointer: '#/idempotency-key', detail: 'was used with a different request' },
    ]);
    expect(await storedUsers(test)).toEqual(before);
  });

  it('POST /v1/users: a request that failed leaves no key behind, so fixing it and retrying with the key works', async () => {
    const failed = await post('key-after-failure', { name: 'No Email' });
    expectProblem(failed, 422, 'validation-failed');
    const conflict = await post(
      'key-after-conflict',
      buildUser({ email: (await post(undefined, buildUser())).json.email }),
    );
    expectProblem(conflict, 409, 'email-taken');
    const count = await test.storage.db
      .selectFrom('idempotency_keys')
      .where('key', 'in', ['key-after-failure', 'key-after-conflict'])
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(0);
    expect((await post('key-after-failure', buildUser())).status).toBe(201);
  });

  it('POST /v1/users: without a key, two identical POSTs are two requests (409 on the second email)', async () => {
    const body = buildUser();
    expect((await post(undefined, body)).status).toBe(201);
    expectProblem(await post(undefined, body), 409, 'email-taken');
  });

  it.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['with a space', 'my key'],
    ['with a non-ASCII character', 'clé'],
  ])('POST /v1/users: 400 invalid-header when the key is %s, and nothing is stored', async (_case, key) => {
    const before = await storedUsers(test);
    const reply = await post(key, buildUser());
    const problem = expectProblem(reply, 400, 'invalid-header');
    expect(problem.errors?.[0]).toMatchObject({ in: 'header', pointer: '#/idempotency-key' });
    expect(await storedUsers(test)).toEqual(before);
  });

  it('POST /v1/users: 50 concurrent requests with one key and one body create exactly one user and all get the same response', async () => {
    const body = buildUser();
    const replies = await Promise.all(Array.from({ length: 50 }, () => post('key-concurrent-1', body)));
    expect(new Set(replies.map((reply) => reply.status))).toEqual(new Set([201]));
    expect(new Set(replies.map((reply) => reply.text)).size).toBe(1);
    expect(replies.filter((reply) => reply.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    const stored = (await storedUsers(test)).filter((row) => row.email === body.email);
    expect(stored).toHaveLength(1);
  });

  it('POST /v1/users: keys are stored in the database, so a restarted server still replays', async () => {
    const body = buildUser();
    const first = await post('key-durable-1', body);
    const second = await openStorage(test.config, pino({ level: 'silent' }));
    const restarted = await buildApp({ config: test.config, storage: second, logger: pino({ level: 'silent' }) });
    try {
      // The same caller as before the restart (keys are scoped per caller): the first app's admin.
      const retry = await call(restarted, {
        method: 'POST',
        url: '/v1/users',
        headers: { 'idempotency-key': 'key-durable-1' },
        body,
        key: test.adminKey,
      });
      expect(retry.status).toBe(201);
      expect(retry.json).toEqual(first.json);
      expect(retry.headers['idempotent-replayed']).toBe('true');
    } finally {
      await restarted.close();
      await second.close();
    }
  });

  it('POST /v1/users: a key past its 24-hour lifetime is forgotten; the retention sweep deletes it and the request runs anew', async () => {
    const body = buildUser();
    const first = await post('key-expired-1', body);
    await test.storage.db
      .updateTable('idempotency_keys')
      .set({ expires_at: '2000-01-01T00:00:00.000Z' } as never)
      .where('key', '=', 'key-expired-1')
      .execute();
    // Run anew: the email is now taken by the first request's user, which proves the work ran again.
    expectProblem(await post('key-expired-1', body), 409, 'email-taken');
    await test.storage.db
      .updateTable('idempotency_keys')
      .set({ expires_at: '2000-01-01T00:00:00.000Z' } as never)
      .execute();
    await test.app.retention.sweep();
    const left = await test.storage.db.selectFrom('idempotency_keys').selectAll().execute();
    expect(left).toEqual([]);
    expect(first.status).toBe(201);
  });
});
