import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';

const KEY_PATTERN = /^rowi_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$/;

/** The editor role's scopes, in the API's stable order (resource by resource; read, create, update, delete). */
const EDITOR_SCOPES = [
  ...['users', 'items', 'stock', 'orders', 'weather'].flatMap((resource) => [
    `${resource}:read`,
    `${resource}:create`,
    `${resource}:update`,
  ]),
  'orders:cancel',
  'events:read',
  'operations:read',
  'operations:update',
];

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

function storedCallers(app: TestApp = test) {
  return app.storage.db.selectFrom('callers').selectAll().orderBy('id').execute();
}

/** Every stored key but last_used_at, which the authenticator writes in the background every few seconds. */
function storedKeys(app: TestApp = test) {
  return app.storage.db
    .selectFrom('api_keys')
    .select(['id', 'caller_id', 'prefix', 'secret_hash', 'description', 'created_at', 'expires_at', 'revoked_at'])
    .orderBy('id')
    .execute();
}

function postCaller(body: unknown, app: TestApp = test) {
  return app.call({ method: 'POST', url: '/v1/callers', body });
}

function patchCaller(id: number, body: unknown, headers: Record<string, string> = {}, app: TestApp = test) {
  return app.call({
    method: 'PATCH',
    url: `/v1/callers/${id}`,
    headers: { 'content-type': 'application/merge-patch+json', ...headers },
    body: JSON.stringify(body),
  });
}

async function newCaller(name: string, role = 'editor', app: TestApp = test) {
  const reply = await postCaller({ name, role }, app);
  if (reply.status !== 201) throw new Error(`could not create caller: ${reply.status} ${reply.text}`);
  return reply.json as { id: number; name: string; role: string; scopes: string[] };
}

async function newKey(callerId: number, body: unknown = {}, app: TestApp = test) {
  const reply = await app.call({ method: 'POST', url: `/v1/callers/${callerId}/keys`, body });
  if (reply.status !== 201) throw new Error(`could not create key: ${reply.status} ${reply.text}`);
  return reply.json as { id: number; key: string; prefix: string };
}

function readUsers(key: string, app: TestApp = test) {
  return app.call({ url: '/v1/users', key });
}

describe('POST /v1/callers', () => {
  it('POST /v1/callers: 201 with Location, ETag and scopes = role + extra − removed, stored with its grants', async () => {
    const reply = await postCaller({
      name: 'sales-system',
      role: 'editor',
      extra_scopes: ['orders:delete'],
      removed_scopes: ['weather:read'],
    });

    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/callers/${reply.json.id}`);
    expect(reply.headers.etag).toBe('"v1"');
    const expectedScopes = EDITOR_SCOPES.filter((scope) => scope !== 'weather:read');
    expectedScopes.splice(expectedScopes.indexOf('orders:update') + 1, 0, 'orders:delete');
    expect(reply.json).toEqual({
      id: expect.any(Number),
      name: 'sales-system',
      role: 'editor',
      extra_scopes: ['orders:delete'],
      removed_scopes: ['weather:read'],
      scopes: expectedScopes,
      record_access: { users: 'all', items: 'all', orders: 'all' },
      rate_limit: null,
      created_at: expect.any(String),
      updated_at: reply.json.created_at,
    });
    const stored = await test.storage.db
      .selectFrom('callers')
      .selectAll()
      .where('id', '=', reply.json.id)
      .executeTakeFirstOrThrow();
    expect(stored).toMatchObject({
      name: 'sales-system',
      role: 'editor',
      extra_scopes: 'orders:delete',
      removed_scopes: 'weather:read',
      version: 1,
    });
    // A caller starts without keys.
    expect((await storedKeys()).filter((key) => key.caller_id === reply.json.id)).toEqual([]);
  });

  it.each([
    ['a name with a capital and a space', { name: 'Sales System', role: 'reader' }, '#/name'],
    ['a 65-character name', { name: 'a'.repeat(65), role: 'reader' }, '#/name'],
    ['an empty name', { name: '', role: 'reader' }, '#/name'],
    ['an unknown role', { name: 'crm', role: 'superuser' }, '#/role'],
    ['no role', { name: 'crm' }, '#/role'],
    [
      'an unknown scope',
      { name: 'crm', role: 'reader', extra_scopes: ['users:read', 'users:fly'] },
      '#/extra_scopes/1',
    ],
    [
      'an unknown removed scope',
      { name: 'crm', role: 'reader', removed_scopes: ['stock:steal'] },
      '#/removed_scopes/0',
    ],
    ['a rate limit of 0', { name: 'crm', role: 'reader', rate_limit: 0 }, '#/rate_limit'],
    ['a rate limit that is not an integer', { name: 'crm', role: 'reader', rate_limit: 1.5 }, '#/rate_limit'],
    ['a rate limit as a string', { name: 'crm', role: 'reader', rate_limit: '100' }, '#/rate_limit'],
    [
      'caller management as an extra scope',
      { name: 'crm', role: 'editor', extra_scopes: ['items:delete', 'callers:create'] },
      '#/extra_scopes/1',
    ],
    ['an unknown field', { name: 'crm', role: 'reader', colour: 'blue' }, '#/colour'],
  ])('POST /v1/callers: 422 pointing at the field when the body has %s; nothing stored', async (_, body, pointer) => {
    const before = await storedCallers();
    const reply = await postCaller(body);
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toContain(pointer);
    expect(problem.errors?.every((error) => error.in === 'body' && error.detail !== '')).toBe(true);
    expect(await storedCallers()).toEqual(before);
  });

  it('POST /v1/callers: 409 caller-name-taken when another caller has the name; nothing stored', async () => {
    await newCaller('billing');
    const before = await storedCallers();
    const reply = await postCaller({ name: 'billing', role: 'reader' });
    const problem = expectProblem(reply, 409, 'caller-name-taken');
    expect(problem.conflicting_field).toBe('name');
    expect(await storedCallers()).toEqual(before);
  });
});

describe('GET /v1/callers', () => {
  it('GET /v1/callers/{id}: 200 with the caller and its ETag; 304 with If-None-Match; 404 for an unknown id', async () => {
    const created = await newCaller('warehouse', 'reader');
    const reply = await test.call({ url: `/v1/callers/${created.id}` });
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json).toEqual(created);

    const cached = await test.call({ url: `/v1/callers/${created.id}`, headers: { 'if-none-match': '"v1"' } });
    expect(cached.status).toBe(304);
    expectProblem(await test.call({ url: '/v1/callers/999999' }), 404, 'not-found');
  });

  it('GET /v1/callers: pages with limit and cursor in id order, and filters by role', async () => {
    const app = await startApp();
    try {
      for (const [name, role] of [
        ['r1', 'reader'],
        ['e1', 'editor'],
        ['r2', 'reader'],
        ['r3', 'reader'],
      ] as const)
        await newCaller(name, role, app);

      const first = await app.call({ url: '/v1/callers?limit=2' });
      expect(first.status).toBe(200);
      expect(first.json.data.map((caller: { name: string }) => caller.name)).toEqual(['admin', 'r1']);
      expect(first.headers.link).toBe(`</v1/callers?limit=2&cursor=${first.json.next_cursor}>; rel="next"`);
      const second = await app.call({ url: `/v1/callers?limit=2&cursor=${first.json.next_cursor}` });
      expect(second.json.data.map((caller: { name: string }) => caller.name)).toEqual(['e1', 'r2']);
      const third = await app.call({ url: `/v1/callers?limit=2&cursor=${second.json.next_cursor}` });
      expect(third.json).toEqual({ data: [expect.objectContaining({ name: 'r3' })], next_cursor: null });

      const readers = await app.call({ url: '/v1/callers?role=reader' });
      expect(readers.json.data.map((caller: { name: string }) => caller.name)).toEqual(['r1', 'r2', 'r3']);
      expectProblem(await app.call({ url: '/v1/callers?role=owner' }), 400, 'invalid-query');
    } finally {
      await app.close();
    }
  });
});

describe('PATCH /v1/callers/{id}', () => {
  it.each([
    ['0', 0],
    ['a fraction', 2.5],
    ['a string', '100'],
    ['a negative number', -1],
  ])(
    'PATCH /v1/callers/{id}: 422 pointing at #/rate_limit when it is %s; nothing stored changes',
    async (_, rateLimit) => {
      const { caller } = await createCallerWithKey(test, { role: 'reader' });
      const before = await storedCallers();
      const problem = expectProblem(await patchCaller(caller.id, { rate_limit: rateLimit }), 422, 'validation-failed');
      expect(problem.errors?.map((error) => error.pointer)).toContain('#/rate_limit');
      expect(await storedCallers()).toEqual(before);
    },
  );

  it('PATCH /v1/callers/{id}: 200 with the new role and grants, a new ETag, and the key gets the new scopes at once', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'reader' });
    expectProblem(
      await test.call({ method: 'POST', url: '/v1/users', key, body: { name: 'A', email: 'a.patch@example.com' } }),
      403,
      'insufficient-scope',
    );

    const reply = await patchCaller(
      caller.id,
      { role: 'editor', extra_scopes: ['users:delete'], removed_scopes: ['items:create'] },
      { 'if-match': '"v1"' },
    );

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
    expect(reply.json).toMatchObject({
      id: caller.id,
      role: 'editor',
      extra_scopes: ['users:delete'],
      removed_scopes: ['items:create'],
    });
    expect(reply.json.scopes).toContain('users:delete');
    expect(reply.json.scopes).toContain('users:create');
    expect(reply.json.scopes).not.toContain('items:create');
    const stored = await test.storage.db
      .selectFrom('callers')
      .selectAll()
      .where('id', '=', caller.id)
      .executeTakeFirstOrThrow();
    expect(stored).toMatchObject({
      role: 'editor',
      extra_scopes: 'users:delete',
      removed_scopes: 'items:create',
      version: 2,
    });
    // The change applies at once on this instance.
    expect(
      (await test.call({ method: 'POST', url: '/v1/users', key, body: { name: 'A', email: 'a.patch@example.com' } }))
        .status,
    ).toBe(201);
    expectProblem(
      await test.call({ method: 'POST', url: '/v1/items', key, body: { name: 'W', sku: 'PATCH-W', price: '1.00' } }),
      403,
      'insufficient-scope',
    );
  });

  it('PATCH /v1/callers/{id}: 412 when If-Match names an old version; nothing stored changes', async () => {
    const caller = await newCaller('stale-editor', 'editor');
    expect((await patchCaller(caller.id, { removed_scopes: ['users:create'] })).status).toBe(200);
    const before = await storedCallers();
    const reply = await patchCaller(caller.id, { role: 'reader' }, { 'if-match': '"v1"' });
    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedCallers()).toEqual(before);
  });

  it('PATCH /v1/callers/{id}: 422 when the patch grants caller management; nothing stored changes', async () => {
    const caller = await newCaller('no-manager', 'editor');
    const before = await storedCallers();
    const problem = expectProblem(
      await patchCaller(caller.id, { extra_scopes: ['callers:delete'] }),
      422,
      'validation-failed',
    );
    expect(problem.errors?.map((error) => error.pointer)).toContain('#/extra_scopes/0');
    expect(await storedCallers()).toEqual(before);
  });
});

describe('DELETE /v1/callers/{id}', () => {
  it('DELETE /v1/callers/{id}: 204, the caller and its keys are gone, and its key gets 401 at once', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'reader' });
    expect((await readUsers(key)).status).toBe(200);

    const reply = await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}` });

    expect(reply.status).toBe(204);
    expect(reply.text).toBe('');
    const refused = await readUsers(key);
    expectProblem(refused, 401, 'invalid-credentials');
    expect(refused.headers['www-authenticate']).toMatch(/^Bearer realm="rowi", error="invalid_token"/);
    expect((await storedCallers()).some((row) => row.id === caller.id)).toBe(false);
    expect((await storedKeys()).some((row) => row.caller_id === caller.id)).toBe(false);
    expectProblem(await test.call({ url: `/v1/callers/${caller.id}` }), 404, 'not-found');
  });

  it('DELETE /v1/callers/{id}: 412 with a stale If-Match; the caller stays', async () => {
    const caller = await newCaller('kept-by-etag', 'reader');
    expect((await patchCaller(caller.id, { role: 'editor' })).status).toBe(200);
    const before = await storedCallers();
    expectProblem(
      await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}`, headers: { 'if-match': '"v1"' } }),
      412,
      'precondition-failed',
    );
    expect(await storedCallers()).toEqual(before);
  });
});

describe('the last admin', () => {
  let lone: TestApp;
  beforeAll(async () => {
    lone = await startApp();
  });
  afterAll(() => lone.close());

  it('PATCH /v1/callers/{id}: 409 last-admin when demoting the only admin; nothing stored changes and its key still manages callers', async () => {
    const before = { callers: await storedCallers(lone), keys: await storedKeys(lone) };
    const reply = await patchCaller(1, { role: 'editor' }, {}, lone);
    expectProblem(reply, 409, 'last-admin');
    expect({ callers: await storedCallers(lone), keys: await storedKeys(lone) }).toEqual(before);
    expect((await lone.call({ url: '/v1/callers' })).status).toBe(200);
  });

  it('DELETE /v1/callers/{id}: 409 last-admin when deleting the only admin; nothing stored changes', async () => {
    const before = { callers: await storedCallers(lone), keys: await storedKeys(lone) };
    expectProblem(await lone.call({ method: 'DELETE', url: '/v1/callers/1' }), 409, 'last-admin');
    expect({ callers: await storedCallers(lone), keys: await storedKeys(lone) }).toEqual(before);
  });

  it('PATCH /v1/callers/{id}: 200 demoting an admin when another admin remains', async () => {
    const second = await newCaller('second-admin', 'admin', lone);
    const reply = await patchCaller(second.id, { role: 'reader' }, {}, lone);
    expect(reply.status).toBe(200);
    expect(reply.json.role).toBe('reader');
    expect((await storedCallers(lone)).filter((row) => row.role === 'admin').map((row) => row.id)).toEqual([1]);
  });
});

describe('/v1/callers/{id}/keys', () => {
  it("POST /v1/callers/{id}/keys: 201 with the key once, Cache-Control no-store, Location; the key works with the caller's role", async () => {
    const caller = await newCaller('key-holder', 'reader');

    const reply = await test.call({ method: 'POST', url: `/v1/callers/${caller.id}/keys`, body: {} });

    expect(reply.status).toBe(201);
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.headers.location).toBe(`/v1/callers/${caller.id}/keys/${reply.json.id}`);
    expect(reply.json).toEqual({
      id: expect.any(Number),
      caller_id: caller.id,
      prefix: reply.json.key.slice(0, 13),
      description: '',
      created_at: expect.any(String),
      expires_at: null,
      last_used_at: null,
      revoked_at: null,
      key: expect.stringMatching(KEY_PATTERN),
    });
    expect((await readUsers(reply.json.key)).status).toBe(200);
    const write = await test.call({
      method: 'POST',
      url: '/v1/users',
      key: reply.json.key,
      body: { name: 'R', email: 'r.key@example.com' },
    });
    expect(expectProblem(write, 403, 'insufficient-scope').required_scopes).toEqual(['users:create']);
  });

  it('GET /v1/callers/{id}/keys and /keys/{key_id}: the records, never the key nor its hash', async () => {
    const caller = await newCaller('listed-keys', 'reader');
    const first = await newKey(caller.id, { description: 'first' });
    const second = await newKey(caller.id, { description: 'second' });
    const hashes = (await storedKeys()).filter((row) => row.caller_id === caller.id).map((row) => row.secret_hash);

    const list = await test.call({ url: `/v1/callers/${caller.id}/keys` });
    const one = await test.call({ url: `/v1/callers/${caller.id}/keys/${first.id}` });

    expect(list.status).toBe(200);
    expect(list.json.data.map((key: { id: number }) => key.id)).toEqual([first.id, second.id]);
    expect(one.status).toBe(200);
    expect(one.json).toEqual({
      id: first.id,
      caller_id: caller.id,
      prefix: first.prefix,
      description: 'first',
      created_at: expect.any(String),
      expires_at: null,
      last_used_at: null,
      revoked_at: null,
    });
    for (const text of [list.text, one.text]) {
      expect(text).not.toContain('"key"');
      expect(text).not.toContain('secret_hash');
      for (const secret of [first.key, second.key, first.key.slice(14), second.key.slice(14), ...hashes])
        expect(text).not.toContain(secret);
    }
    expectProblem(await test.call({ url: `/v1/callers/${caller.id}/keys/999999` }), 404, 'not-found');
    expectProblem(await test.call({ url: `/v1/callers/999999/keys` }), 404, 'not-found');
  });

  it('POST /v1/callers/{id}/keys: 422 when expires_at is in the past; no key stored', async () => {
    const caller = await newCaller('past-expiry', 'reader');
    const before = await storedKeys();
    const reply = await test.call({
      method: 'POST',
      url: `/v1/callers/${caller.id}/keys`,
      body: { expires_at: new Date(Date.now() - 60_000).toISOString() },
    });
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors).toEqual([{ in: 'body', pointer: '#/expires_at', detail: expect.any(String) }]);
    expect(await storedKeys()).toEqual(before);
  });

  it('POST /v1/callers/{id}/keys: 422 for an unknown field or a malformed expires_at; 404 for an unknown caller; no key stored', async () => {
    const caller = await newCaller('bad-key-bodies', 'reader');
    const before = await storedKeys();
    const unknown = expectProblem(
      await test.call({ method: 'POST', url: `/v1/callers/${caller.id}/keys`, body: { scopes: ['users:read'] } }),
      422,
      'validation-failed',
    );
    expect(unknown.errors?.map((error) => error.pointer)).toEqual(['#/scopes']);
    const malformed = expectProblem(
      await test.call({ method: 'POST', url: `/v1/callers/${caller.id}/keys`, body: { expires_at: 'tomorrow' } }),
      422,
      'validation-failed',
    );
    expect(malformed.errors?.map((error) => error.pointer)).toEqual(['#/expires_at']);
    expectProblem(await test.call({ method: 'POST', url: '/v1/callers/999999/keys', body: {} }), 404, 'not-found');
    expect(await storedKeys()).toEqual(before);
  });

  it('POST /v1/callers/{id}/keys: a key with expires_at 1 s ahead works, then gets 401 invalid-credentials once it has passed', async () => {
    const caller = await newCaller('short-lived', 'reader');
    const expiresAt = Date.now() + 1000;
    const { key } = await newKey(caller.id, { expires_at: new Date(expiresAt).toISOString() });
    expect((await readUsers(key)).status).toBe(200);

    await sleep(expiresAt - Date.now() + 20);
    // Within FRESH_MS at most (see the known bug below: it should be at once).
    let refused = await readUsers(key);
    while (refused.status === 200 && Date.now() < expiresAt + 1000) {
      await sleep(20);
      refused = await readUsers(key);
    }

    expect(Date.now() - expiresAt).toBeLessThan(600);
    expect(expectProblem(refused, 401, 'invalid-credentials').detail).toMatch(/expired/);
    expect(refused.headers['www-authenticate']).toMatch(/^Bearer realm="rowi", error="invalid_token"/);
  });

  // A key checked less than FRESH_MS (500 ms) before its expires_at must not be believed from
  // the in-memory cache after it.
  it('POST /v1/callers/{id}/keys: 401 at once when expires_at passes, even for a key used moments before', async () => {
    const caller = await newCaller('short-lived-busy', 'reader');
    const expiresAt = Date.now() + 1000;
    const { key } = await newKey(caller.id, { expires_at: new Date(expiresAt).toISOString() });
    await sleep(expiresAt - Date.now() - 100);
    // A fresh check of the key from the database, 100 ms before it expires.
    test.app.auth.forget();
    expect((await readUsers(key)).status).toBe(200);

    await sleep(expiresAt - Date.now() + 20);

    expectProblem(await readUsers(key), 401, 'invalid-credentials');
  });

  it('DELETE /v1/callers/{id}/keys/{key_id}: 204, the key gets 401 at once, revoked_at is set and the key is still listed', async () => {
    const caller = await newCaller('revoked-holder', 'reader');
    const { id: keyId, key } = await newKey(caller.id);
    const { key: otherKey } = await newKey(caller.id);
    expect((await readUsers(key)).status).toBe(200);

    const started = new Date().toISOString();
    const reply = await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` });

    expect(reply.status).toBe(204);
    expect(expectProblem(await readUsers(key), 401, 'invalid-credentials').detail).toMatch(/revoked/);
    // The caller's other key is untouched.
    expect((await readUsers(otherKey)).status).toBe(200);
    const listed = await test.call({ url: `/v1/callers/${caller.id}/keys` });
    const record = listed.json.data.find((entry: { id: number }) => entry.id === keyId);
    expect(record.revoked_at >= started).toBe(true);
    const stored = await test.storage.db
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('id', '=', keyId)
      .executeTakeFirstOrThrow();
    expect(stored.revoked_at).toBe(record.revoked_at);
    // Revoking again changes nothing.
    expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` })).status).toBe(204);
    expect(
      (
        await test.storage.db
          .selectFrom('api_keys')
          .select('revoked_at')
          .where('id', '=', keyId)
          .executeTakeFirstOrThrow()
      ).revoked_at,
    ).toBe(record.revoked_at);
  });

  it('DELETE /v1/callers/{id}/keys/{key_id}: 404 when the key belongs to another caller; the key is not revoked and still works', async () => {
    const owner = await newCaller('key-owner', 'reader');
    const stranger = await newCaller('key-stranger', 'reader');
    const { id: keyId, key } = await newKey(owner.id);
    const before = await storedKeys();

    expectProblem(
      await test.call({ method: 'DELETE', url: `/v1/callers/${stranger.id}/keys/${keyId}` }),
      404,
      'not-found',
    );
    expectProblem(await test.call({ url: `/v1/callers/${stranger.id}/keys/${keyId}` }), 404, 'not-found');

    expect(await storedKeys()).toEqual(before);
    expect((await readUsers(key)).status).toBe(200);
  });

  it("the database stores no key: no column of api_keys holds the key or its secret part; secret_hash is the key's SHA-256 in base64url", async () => {
    const caller = await newCaller('hashed-only', 'reader');
    const { id, key } = await newKey(caller.id);
    const secretPart = key.slice('rowi_xxxxxxxx_'.length);
    expect(secretPart).toHaveLength(43);

    const rows = await test.storage.db.selectFrom('api_keys').selectAll().execute();
    for (const row of rows) {
      for (const value of Object.values(row)) {
        expect(String(value)).not.toContain(secretPart);
        expect(String(value)).not.toContain(key);
      }
    }
    const row = rows.find((entry) => entry.id === id)!;
    expect(row.secret_hash).toBe(createHash('sha256').update(key).digest('base64url'));
    expect(row.prefix).toBe(key.slice(0, 13));
  });
});

describe('only admins manage callers', () => {
  it.each(['editor', 'reader'] as const)(
    'every /v1/callers route: 403 insufficient-scope for an %s; nothing stored changes',
    async (role) => {
      const { key } = await createCallerWithKey(test, { role });
      const target = await newCaller(`target-of-${role}`, 'reader');
      const { id: keyId } = await newKey(target.id);
      // All but /v1/callers/me, which any caller may ask who it is (callers.me.test.ts).
      const routes = test.app.routeTable
        .list()
        .filter((route) => route.url.startsWith('/v1/callers') && route.url !== '/v1/callers/me');
      // Every route of /v1/callers: the five methods on the collection and the record, and those of the keys.
      expect(routes.length).toBeGreaterThanOrEqual(9);
      const before = { callers: await storedCallers(), keys: await storedKeys() };

      for (const route of routes) {
        const url = route.url.replace(':id', String(target.id)).replace(':key_id', String(keyId));
        const body =
          route.method === 'POST' || route.method === 'PATCH' ? { name: `hijack-${role}`, role: 'admin' } : undefined;
        const reply = await test.call({
          method: route.method as 'GET',
          url,
          key,
          body,
          headers: route.method === 'PATCH' ? { 'content-type': 'application/merge-patch+json' } : {},
        });
        if (route.method === 'HEAD') {
          expect(reply.status, `${route.method} ${route.url}`).toBe(403);
          continue;
        }
        const problem = expectProblem(reply, 403, 'insufficient-scope');
        expect(
          (problem.required_scopes as string[]).every((scope) => scope.startsWith('callers:')),
          `${route.method} ${route.url}`,
        ).toBe(true);
        expect(reply.headers['www-authenticate']).toMatch(/error="insufficient_scope"/);
      }
      expect({ callers: await storedCallers(), keys: await storedKeys() }).toEqual(before);
    },
  );
});

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
