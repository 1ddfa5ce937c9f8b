import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';

/**
 * Nobody is ever locked out of caller management through the API. A caller can manage callers
 * when it has the admin role, still holds callers:read and callers:update (with those it can give
 * any scope back), and has a working API key. A change after which no caller could (a demotion,
 * removed scopes, a deletion, the revocation of a last key) is refused with 409 last-admin, whose
 * detail says why, and nothing stored changes.
 */
let test: TestApp;
beforeEach(async () => {
  test = await startApp();
});
afterEach(() => test.close());

const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };

const patchCaller = (id: number, body: unknown, key?: string) =>
  test.call({
    method: 'PATCH',
    url: `/v1/callers/${id}`,
    headers: MERGE_PATCH,
    body: JSON.stringify(body),
    ...(key ? { key } : {}),
  });

async function storedState() {
  const db = test.storage.db;
  return {
    callers: await db.selectFrom('callers').selectAll().orderBy('id').execute(),
    keys: await db.selectFrom('api_keys').selectAll().orderBy('id').execute(),
  };
}

/** Refused with last-admin, nothing changed, and the first admin's key still manages callers. */
async function expectRefused(
  reply: Awaited<ReturnType<TestApp['call']>>,
  before: Awaited<ReturnType<typeof storedState>>,
  detail: RegExp,
) {
  const problem = expectProblem(reply, 409, 'last-admin');
  expect(problem.detail).toMatch(detail);
  expect(await storedState()).toEqual(before);
  expect((await test.call({ url: '/v1/callers' })).status).toBe(200);
}

describe('the last caller that can manage callers', () => {
  it.each([
    ['callers:update', ['callers:update']],
    ['callers:read', ['callers:read']],
    ['both', ['callers:read', 'callers:update', 'callers:delete']],
  ])(
    'PATCH /v1/callers/{id}: 409 last-admin when the only admin removes %s from itself through removed_scopes',
    async (_case, removed) => {
      const before = await storedState();
      await expectRefused(
        await patchCaller(1, { removed_scopes: removed }),
        before,
        /would leave no caller that can manage callers/,
      );
    },
  );

  it('PATCH /v1/callers/{id}: 200 when the only admin removes callers:delete and callers:create from itself: it can still give them back', async () => {
    const removed = await patchCaller(1, { removed_scopes: ['callers:delete', 'callers:create'] });
    expect(removed.status).toBe(200);
    expect(removed.json.scopes).not.toContain('callers:delete');
    const restored = await patchCaller(1, { removed_scopes: [] });
    expect(restored.status).toBe(200);
    expect(restored.json.scopes).toContain('callers:delete');
  });

  it('PATCH /v1/callers/{id}: 409 last-admin when the only admin is demoted', async () => {
    const before = await storedState();
    await expectRefused(
      await patchCaller(1, { role: 'editor' }),
      before,
      /demoting it to editor would leave nobody able to/,
    );
  });

  it('DELETE /v1/callers/{id}: 409 last-admin when the only admin is deleted', async () => {
    const before = await storedState();
    await expectRefused(
      await test.call({ method: 'DELETE', url: '/v1/callers/1' }),
      before,
      /deleting it would leave nobody able to/,
    );
  });

  it("DELETE /v1/callers/{id}/keys/{key_id}: 409 last-admin when it is the only admin's last working key", async () => {
    const before = await storedState();
    await expectRefused(
      await test.call({ method: 'DELETE', url: '/v1/callers/1/keys/1' }),
      before,
      /last working API key of caller 1/,
    );
  });

  it('DELETE /v1/callers/{id}/keys/{key_id}: 204 when the admin has another working key, then 409 for that last one', async () => {
    const second = await test.call({ method: 'POST', url: '/v1/callers/1/keys', body: {} });
    expect(second.status).toBe(201);
    expect((await test.call({ method: 'DELETE', url: '/v1/callers/1/keys/1', key: second.json.key })).status).toBe(204);
    const before = await storedState();
    const reply = await test.call({
      method: 'DELETE',
      url: `/v1/callers/1/keys/${second.json.id}`,
      key: second.json.key,
    });
    const problem = expectProblem(reply, 409, 'last-admin');
    expect(problem.detail).toMatch(new RegExp(`Key ${second.json.id} is the last working API key`));
    expect(await storedState()).toEqual(before);
  });

  it('PATCH /v1/callers/{id}: 409 last-admin when the only other admin has no API key', async () => {
    const other = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'keyless-admin', role: 'admin' },
    });
    expect(other.status).toBe(201);
    const before = await storedState();
    await expectRefused(await patchCaller(1, { role: 'reader' }), before, /last caller that can manage callers/);
  });

  it("PATCH /v1/callers/{id}: 409 last-admin when the only other admin's keys are revoked or expired", async () => {
    const other = await createCallerWithKey(test, { role: 'admin' });
    const expired = await test.call({
      method: 'POST',
      url: `/v1/callers/${other.caller.id}/keys`,
      body: { expires_at: '2099-01-01T00:00:00Z' },
    });
    await test.storage.db
      .updateTable('api_keys')
      .set({ expires_at: '2001-01-01T00:00:00.000Z' })
      .where('id', '=', expired.json.id)
      .execute();
    expect(
      (await test.call({ method: 'DELETE', url: `/v1/callers/${other.caller.id}/keys/${other.keyId}` })).status,
    ).toBe(204);
    const before = await storedState();
    await expectRefused(
      await test.call({ method: 'DELETE', url: '/v1/callers/1' }),
      before,
      /deleting it would leave nobody able to/,
    );
  });

  it('PATCH /v1/callers/{id}: 409 last-admin when the only other admin has lost callers:update', async () => {
    await createCallerWithKey(test, { role: 'admin', removed_scopes: ['callers:update'] });
    const before = await storedState();
    await expectRefused(
      await patchCaller(1, { removed_scopes: ['callers:read'] }),
      before,
      /Removing callers:read from caller 1/,
    );
  });

  it('PATCH and DELETE /v1/callers/{id}: 200 and 204 when another admin with a working key remains, and that admin manages callers afterwards', async () => {
    const other = await createCallerWithKey(test, { role: 'admin' });
    expect((await patchCaller(1, { role: 'editor' })).status).toBe(200);
    expect((await test.call({ method: 'DELETE', url: '/v1/callers/1', key: other.key })).status).toBe(204);
    expect((await test.call({ url: '/v1/callers', key: other.key })).status).toBe(200);
    expectProblem(
      await test.call({ method: 'DELETE', url: `/v1/callers/${other.caller.id}`, key: other.key }),
      409,
      'last-admin',
    );
  });

  it("concurrently demoting one admin and revoking the other admin's only key: never both; a caller that can manage callers always remains (20 rounds)", async () => {
    for (let round = 0; round < 20; round++) {
      const first = await createCallerWithKey(test, { role: 'admin' });
      const second = await createCallerWithKey(test, { role: 'admin' });
      // The first admin of the database steps aside, so these two are the only ones with keys.
      expect((await test.call({ method: 'DELETE', url: '/v1/callers/1/keys/1', key: first.key })).status).toBe(204);

      const [demote, revoke] = await Promise.all([
        patchCaller(first.caller.id, { role: 'reader' }, second.key),
        test.call({ method: 'DELETE', url: `/v1/callers/${second.caller.id}/keys/${second.keyId}`, key: first.key }),
      ]);

      // Never both. The one that loses is refused 409 last-admin, or 403 when the demotion landed
      // first and the revocation came from the caller it demoted.
      expect(demote.status === 200 && revoke.status === 204, `round ${round}: ${demote.text} / ${revoke.text}`).toBe(
        false,
      );
      expect([200, 204], `round ${round}: neither succeeded: ${demote.text} / ${revoke.text}`).toContain(
        demote.status === 200 ? 200 : revoke.status,
      );
      const survivor = demote.status === 200 ? second.key : first.key;
      expect((await test.call({ url: '/v1/callers', key: survivor })).status).toBe(200);

      // Back to one admin with a key for the next round.
      await test.storage.db.deleteFrom('callers').where('id', 'in', [first.caller.id, second.caller.id]).execute();
      const [restored] = await test.storage.db.selectFrom('api_keys').select('id').where('caller_id', '=', 1).execute();
      await test.storage.db.updateTable('api_keys').set({ revoked_at: null }).where('id', '=', restored!.id).execute();
      await test.app.auth.forget();
    }
  });
});
