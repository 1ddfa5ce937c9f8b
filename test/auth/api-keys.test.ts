import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { openStorage } from '../../src/db/connect.js';
import { call, startApp, type CallOptions, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';
import { BACKEND } from '../helpers/database.js';

let test: TestApp;
beforeAll(async () => {
  // The audit trail is written only on close here, so that counting writes sees the keys' alone.
  test = await startApp({ ROWI_AUDIT_FLUSH_INTERVAL: '60000' });
});
afterAll(() => test.close());

/** A key of the right form that rowi never issued. */
const UNKNOWN_KEY = `rowi_zzzzzzzz_${'A'.repeat(43)}`;

function postUser(options: Omit<CallOptions, 'url'> & { query?: string }) {
  return test.call({ method: 'POST', url: `/v1/users${options.query ?? ''}`, body: buildUser(), ...options });
}

/**
 * Rows of api_keys written (updated), counted by a trigger the first call creates: the writer's
 * other writes (the audit trail, the webhook dispatcher's lease and cursor in the background) do
 * not count.
 */
let counting = false;
async function rowsWritten(): Promise<number> {
  const db = test.storage.db;
  if (!counting) {
    await sql`create table key_writes (n bigint not null)`.execute(db);
    await sql`insert into key_writes values (0)`.execute(db);
    if (BACKEND === 'sqlite') {
      await sql`create trigger count_key_writes after update on api_keys for each row begin update key_writes set n = n + 1; end`.execute(
        db,
      );
    } else {
      await sql`create function count_key_write() returns trigger language plpgsql as $$ begin update key_writes set n = n + 1; return new; end $$`.execute(
        db,
      );
      await sql`create trigger count_key_writes after update on api_keys for each row execute function count_key_write()`.execute(
        db,
      );
    }
    counting = true;
  }
  return Number((await sql<{ n: number }>`select n from key_writes`.execute(db)).rows[0]!.n);
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('bad credentials: a clear problem, and nothing stored changes', () => {
  const huge = 'x'.repeat(10 * 1024);

  it.each<[string, () => Omit<CallOptions, 'url'> & { query?: string }]>([
    ['a valid key in ?api_key=', () => ({ query: `?api_key=${test.adminKey}`, key: null })],
    ['a valid key in ?api_key= beside a valid X-API-Key', () => ({ query: `?api_key=${test.adminKey}` })],
    ['?access_token=', () => ({ query: '?access_token=x', key: null })],
    ['?x-api-key=', () => ({ query: `?limit=1&X-API-Key=${test.adminKey}`, key: null })],
    ['a 10 KB X-API-Key', () => ({ headers: { 'x-api-key': huge } })],
    ['a 10 KB Authorization', () => ({ headers: { authorization: `Bearer ${huge}` } })],
    ['an empty X-API-Key', () => ({ headers: { 'x-api-key': '' } })],
    [
      'X-API-Key and Authorization together',
      () => ({ headers: { 'x-api-key': test.adminKey, authorization: 'Bearer abc.def.ghi' } }),
    ],
    ['an Authorization naming no token', () => ({ headers: { authorization: 'Bearer ' } })],
  ])('POST /v1/users: 400 malformed-credentials when the request carries %s', async (_, options) => {
    const before = await storedUsers(test);
    const reply = await postUser(options());
    const problem = expectProblem(reply, 400, 'malformed-credentials');
    expect(problem.detail.length).toBeGreaterThan(10);
    expect(problem.instance).toBe('/v1/users');
    expect(reply.headers['www-authenticate']).toMatch(
      /^Bearer realm="rowi", error="invalid_request", error_description="[^"]+"$/,
    );
    // The key is never echoed back.
    expect(reply.text).not.toContain(test.adminKey);
    expect(await storedUsers(test)).toEqual(before);
  });

  it('GET /v1/users: 400 malformed-credentials when a valid key is sent in ?api_key=', async () => {
    const reply = await test.call({ url: `/v1/users?api_key=${test.adminKey}`, key: null });
    expectProblem(reply, 400, 'malformed-credentials');
    expect(reply.text).not.toContain(test.adminKey);
  });

  it('POST /v1/users: 401 missing-credentials with WWW-Authenticate: Bearer realm="rowi" when no credentials are sent', async () => {
    const before = await storedUsers(test);
    const reply = await postUser({ key: null });
    expectProblem(reply, 401, 'missing-credentials');
    expect(reply.headers['www-authenticate']).toBe('Bearer realm="rowi"');
    expect(await storedUsers(test)).toEqual(before);
  });

  it.each<[string, () => Promise<Record<string, string>>, RegExp]>([
    ['a malformed key ("abc")', async () => ({ 'x-api-key': 'abc' }), /not one rowi issued/],
    ['a well-formed key rowi never issued', async () => ({ 'x-api-key': UNKNOWN_KEY }), /not known/],
    [
      'a known prefix with a wrong secret',
      async () => ({ 'x-api-key': `${test.adminKey.slice(0, 14)}${'B'.repeat(43)}` }),
      /not known/,
    ],
    [
      'a revoked key',
      async () => {
        const { caller, keyId, key } = await createCallerWithKey(test, { role: 'admin' });
        expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` })).status).toBe(204);
        return { 'x-api-key': key };
      },
      /revoked/,
    ],
    ['a bearer token that is not a JWT', async () => ({ authorization: 'Bearer not-a-token' }), /./],
    ['Basic credentials', async () => ({ authorization: 'Basic YWRtaW46c2VjcmV0' }), /Bearer/],
  ])(
    'POST /v1/users: 401 invalid-credentials with error="invalid_token" when the request carries %s',
    async (_, headersOf, detail) => {
      const headers = await headersOf();
      const before = await storedUsers(test);
      const reply = await postUser({ headers });
      const problem = expectProblem(reply, 401, 'invalid-credentials');
      expect(problem.detail).toMatch(detail);
      expect(reply.headers['www-authenticate']).toMatch(
        /^Bearer realm="rowi", error="invalid_token", error_description="[^"]+"$/,
      );
      expect(await storedUsers(test)).toEqual(before);
    },
  );

  it('POST /v1/users: 403 insufficient-scope naming users:create when the caller is a reader', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader' });
    const before = await storedUsers(test);
    const reply = await postUser({ key });
    const problem = expectProblem(reply, 403, 'insufficient-scope');
    expect(problem.required_scopes).toEqual(['users:create']);
    expect(reply.headers['www-authenticate']).toMatch(
      /^Bearer realm="rowi", error="insufficient_scope", error_description="[^"]+", scope="users:create"$/,
    );
    expect(await storedUsers(test)).toEqual(before);
  });

  it('POST /v1/users: 403 before the body is read when a reader sends an invalid body', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader' });
    const reply = await test.call({
      method: 'POST',
      url: '/v1/users',
      key,
      body: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(reply, 403, 'insufficient-scope');
  });
});

describe('403 never tells whether a record exists', () => {
  it('DELETE /v1/orders/{id}: the same 403 for an existing and a missing order when the caller may delete orders but not read them', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'SO-403', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    expect(order.status).toBe(201);
    const { key } = await createCallerWithKey(test, {
      role: 'editor',
      extra_scopes: ['orders:delete'],
      removed_scopes: ['orders:read'],
    });

    const existing = await test.call({ method: 'DELETE', url: `/v1/orders/${order.json.id}`, key });
    const missing = await test.call({ method: 'DELETE', url: '/v1/orders/999999', key });

    const existingProblem = expectProblem(existing, 403, 'insufficient-scope');
    const missingProblem = expectProblem(missing, 403, 'insufficient-scope');
    expect(existingProblem.required_scopes).toEqual(['orders:read']);
    const { request_id: _a, instance: _b, ...existingRest } = existingProblem;
    const { request_id: _c, instance: _d, ...missingRest } = missingProblem;
    expect(existingRest).toEqual(missingRest);
    expect(existing.headers['www-authenticate']).toBe(missing.headers['www-authenticate']);
    expect(
      await test.storage.db.selectFrom('orders').select('id').where('id', '=', order.json.id).executeTakeFirst(),
    ).toEqual({ id: order.json.id });
  });
});

describe('revocation on another instance', () => {
  it('DELETE /v1/callers/{id}/keys/{key_id}: another instance on the same database file answers 401 within 1 s', async () => {
    const other = await openStorage(test.config, pino({ level: 'silent' }));
    const otherApp = await buildApp({ config: test.config, storage: other, logger: pino({ level: 'silent' }) });
    try {
      await otherApp.ready();
      const { caller, keyId, key } = await createCallerWithKey(test, { role: 'reader' });
      // The other instance has checked the key and believes it.
      expect((await call(otherApp, { url: '/v1/users', key })).status).toBe(200);

      expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` })).status).toBe(204);
      const revokedAt = Date.now();
      expectProblem(await test.call({ url: '/v1/users', key }), 401, 'invalid-credentials');

      let reply = await call(otherApp, { url: '/v1/users', key });
      while (reply.status === 200 && Date.now() - revokedAt < 2000) {
        await sleep(50);
        reply = await call(otherApp, { url: '/v1/users', key });
      }
      const elapsed = Date.now() - revokedAt;
      expectProblem(reply, 401, 'invalid-credentials');
      expect(elapsed).toBeLessThanOrEqual(1000);
    } finally {
      await otherApp.close();
      await other.close();
    }
  });
});

describe('last_used_at', () => {
  it('GET /v1/callers/{id}/keys/{key_id}: last_used_at is null before use and set once after 100 uses, by one write when the authenticator flushes', async () => {
    const { caller, keyId, key } = await createCallerWithKey(test, { role: 'reader' });
    const record = () => test.call({ url: `/v1/callers/${caller.id}/keys/${keyId}` });
    expect((await record()).json.last_used_at).toBeNull();
    // Writes the admin key's own use (reading the record), so that only the new key is pending.
    await test.app.auth.flushLastUsed();

    // Count every flush, the background ones included (they call this.flushLastUsed()).
    const auth = test.app.auth;
    const flush = auth.flushLastUsed.bind(auth);
    let flushes = 0;
    auth.flushLastUsed = () => {
      flushes++;
      return flush();
    };
    try {
      const writesBefore = await rowsWritten();
      const started = new Date().toISOString();
      for (let index = 0; index < 100; index++)
        expect((await test.call({ url: '/v1/users?limit=1', key })).status).toBe(200);
      const lastUse = new Date().toISOString();
      const writesDuringUse = (await rowsWritten()) - writesBefore;
      await auth.flushLastUsed();
      const writes = (await rowsWritten()) - writesBefore;

      // One row write per flush that found the key used, never one per request.
      expect(writesDuringUse).toBeLessThanOrEqual(flushes - 1);
      expect(writes).toBeGreaterThanOrEqual(1);
      expect(writes).toBeLessThanOrEqual(flushes);
      expect(flushes).toBeLessThanOrEqual(3);
      const usedAt = (await record()).json.last_used_at as string;
      expect(usedAt >= started && usedAt <= lastUse).toBe(true);
      const stored = await test.storage.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', keyId)
        .executeTakeFirstOrThrow();
      expect(stored.last_used_at).toBe(usedAt);
    } finally {
      delete (auth as { flushLastUsed?: unknown }).flushLastUsed;
    }
  });
});
