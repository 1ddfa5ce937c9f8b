import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createCallerWithKey } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

describe('Idempotency-Key per caller', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(async () => test.close());

  it('POST /v1/users: two callers may use the same Idempotency-Key for different requests; each replays only its own', async () => {
    const sales = await createCallerWithKey(test, { role: 'editor' });
    const crm = await createCallerWithKey(test, { role: 'editor' });
    const headers = { 'idempotency-key': 'order-import-42' };

    const first = await test.call({ method: 'POST', url: '/v1/users', headers, key: sales.key, body: buildUser() });
    const second = await test.call({ method: 'POST', url: '/v1/users', headers, key: crm.key, body: buildUser() });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.json.id).not.toBe(first.json.id);
    expect(second.headers['idempotent-replayed']).toBeUndefined();

    const replay = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers,
      key: crm.key,
      body: buildUser({ name: second.json.name, email: second.json.email }),
    });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json).toEqual(second.json);
    expect((await storedUsers(test)).map((user) => user.id)).toEqual([first.json.id, second.json.id]);
  });

  it('POST /v1/users: 422 idempotency-key-reused when the same caller reuses its key for another body', async () => {
    const caller = await createCallerWithKey(test, { role: 'editor' });
    const headers = { 'idempotency-key': 'same-key-other-body' };
    expect(
      (await test.call({ method: 'POST', url: '/v1/users', headers, key: caller.key, body: buildUser() })).status,
    ).toBe(201);
    const before = await storedUsers(test);
    const reused = await test.call({ method: 'POST', url: '/v1/users', headers, key: caller.key, body: buildUser() });
    expectProblem(reused, 422, 'idempotency-key-reused');
    expect(await storedUsers(test)).toEqual(before);
  });
});
