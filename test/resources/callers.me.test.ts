import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerThroughApi, createCallerWithKey, createWithKey } from '../helpers/records.js';
import { eventually } from '../helpers/receiver.js';
import { ADMIN, CHANNEL, READER } from '../helpers/roles.js';

/**
 * GET /v1/callers/me (docs/access.md "Who am I"): who the request is, as its credential resolved,
 * for any valid API key or token whatever its scopes; 401 without one. One app for the file; the
 * same file runs on PostgreSQL.
 */
const AUDIENCE = 'https://rowi.test/api';
const ALL_RECORDS = { users: 'all', items: 'all', orders: 'all' };
const sorted = (scopes: readonly string[]) => [...scopes].sort();

let test: TestApp;
let issuer: LocalIssuer;

beforeAll(async () => {
  issuer = await startIssuer({ audience: AUDIENCE });
  test = await startApp({
    ROWI_JWT_ISSUER: issuer.url,
    ROWI_JWT_AUDIENCE: AUDIENCE,
    ROWI_JWT_JWKS_URL: issuer.jwksUrl,
    ROWI_RATE_LIMIT_READER: '600',
    ROWI_AUDIT_FLUSH_INTERVAL: '50',
  });
});
afterAll(async () => {
  await test?.close();
  await issuer?.close();
});

describe('GET /v1/callers/me', () => {
  it("GET /v1/callers/me: 200 with the admin's identity, not to be stored, when called with the first admin's key", async () => {
    const reply = await test.call({ url: '/v1/callers/me' });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.json).toEqual({
      caller_id: 1,
      name: 'admin',
      role: 'admin',
      credential: 'api_key',
      scopes: sorted(ADMIN),
      record_access: ALL_RECORDS,
      user_id: null,
    });
  });

  it('GET /v1/callers/me: 200 with the scopes its role keeps, counted against its rate limit, when a reader whose scopes were removed calls', async () => {
    const reader = await createCallerWithKey(test, {
      role: 'reader',
      name: 'reporting',
      removed_scopes: ['weather:read', 'events:read'],
    });
    const reply = await test.call({ url: '/v1/callers/me', key: reader.key });
    expect(reply.status).toBe(200);
    expect(reply.headers['ratelimit-policy']).toBe('"caller";q=600;w=60');
    expect(reply.json).toEqual({
      caller_id: reader.caller.id,
      name: 'reporting',
      role: 'reader',
      credential: 'api_key',
      scopes: sorted(READER.filter((scope) => scope !== 'weather:read' && scope !== 'events:read')),
      record_access: ALL_RECORDS,
      user_id: null,
    });
  });

  it('GET /v1/callers/me: 200 while GET /v1/callers/{its id} is 403, when an admin without callers:read calls', async () => {
    const auditor = await createCallerWithKey(test, { role: 'admin', removed_scopes: ['callers:read'] });
    const itself = await test.call({ url: `/v1/callers/${auditor.caller.id}`, key: auditor.key });
    expectProblem(itself, 403, 'insufficient-scope');

    const reply = await test.call({ url: '/v1/callers/me', key: auditor.key });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ caller_id: auditor.caller.id, role: 'admin', credential: 'api_key' });
    expect(reply.json.scopes).not.toContain('callers:read');
    expect(reply.json.scopes).toContain('callers:update');
  });

  it('GET /v1/callers/me: 200 with record access own for users and orders when a channel caller calls', async () => {
    const shop = await createCallerThroughApi(test, 'sales-channel', { role: 'channel' });
    const reply = await test.call({ url: '/v1/callers/me', key: shop.key });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      caller_id: shop.id,
      name: 'sales-channel',
      role: 'channel',
      credential: 'api_key',
      scopes: sorted(CHANNEL),
      record_access: { users: 'own', items: 'all', orders: 'own' },
      user_id: null,
    });
  });

  it('GET /v1/callers/me: 200 with credential oauth, the user and only the scopes the token holds, when a token acting for a user calls', async () => {
    const shop = await createCallerThroughApi(test, 'acting-shop', { role: 'channel', extra_scopes: ['users:act'] });
    const ada = await createWithKey(test, shop.key, '/v1/users', { name: 'Ada', email: 'ada.me@example.com' });
    const token = await issueToken(test, { name: 'acting-shop' }, shop.key, {
      user_id: String(ada.id),
      scope: 'orders:read orders:create users:read',
    });
    const reply = await test.call({ url: '/v1/callers/me', headers: { authorization: `Bearer ${token}` } });
    expect(reply.status).toBe(200);
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.json).toEqual({
      caller_id: shop.id,
      name: 'acting-shop',
      role: 'channel',
      credential: 'oauth',
      scopes: ['orders:create', 'orders:read', 'users:read'],
      record_access: { users: 'own', items: 'all', orders: 'own' },
      user_id: ada.id,
    });
  });

  it("GET /v1/callers/me: 200 with no caller and no role, named by the token's subject, when an external issuer's token with no scopes of rowi calls", async () => {
    const token = await issuer.sign({ sub: 'dashboard@idp', scope: 'profile' });
    const reply = await test.call({ url: '/v1/callers/me', headers: { authorization: `Bearer ${token}` } });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      caller_id: null,
      name: 'dashboard@idp',
      role: null,
      credential: 'external',
      scopes: [],
      record_access: ALL_RECORDS,
      user_id: null,
    });
  });

  it('GET /v1/callers/me: 200 in XML as <identity> when Accept asks for XML', async () => {
    const reply = await test.call({ url: '/v1/callers/me', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toMatch(/<identity[ >]/);
    expect(reply.text).toContain('<name>admin</name>');
  });

  it('HEAD /v1/callers/me: 200 without a body when called with a key', async () => {
    const reply = await test.call({ method: 'HEAD', url: '/v1/callers/me' });
    expect(reply.status).toBe(200);
    expect(reply.text).toBe('');
  });

  it('GET /v1/callers/me: 401 missing-credentials with a Bearer challenge when no credential is sent', async () => {
    const reply = await test.call({ url: '/v1/callers/me', key: null });
    expectProblem(reply, 401, 'missing-credentials');
    expect(reply.headers['www-authenticate']).toBe('Bearer realm="rowi"');
  });

  it('GET /v1/callers/me: 401 invalid-credentials with an invalid_token challenge when the key is not one rowi issued', async () => {
    const reply = await test.call({ url: '/v1/callers/me', key: 'rowi_bad' });
    expectProblem(reply, 401, 'invalid-credentials');
    expect(String(reply.headers['www-authenticate'])).toMatch(/^Bearer realm="rowi", error="invalid_token"/);
  });

  it('GET /v1/callers/me: the audit trail records the caller, resource callers and action read, when a reader asks who it is', async () => {
    const reader = await createCallerWithKey(test, { role: 'reader' });
    const reply = await test.call({ url: '/v1/callers/me', key: reader.key });
    expect(reply.status).toBe(200);
    const requestId = String(reply.headers['x-request-id']);
    const stored = await eventually(
      () => test.storage.db.selectFrom('audit_events').selectAll().where('request_id', '=', requestId).execute(),
      (rows) => rows.length > 0,
      3000,
    );
    expect(stored).toMatchObject([
      {
        caller_id: reader.caller.id,
        caller_name: reader.caller.name,
        credential: 'api_key',
        user_id: null,
        method: 'GET',
        path: '/v1/callers/me',
        resource: 'callers',
        record_id: null,
        action: 'read',
        status: 200,
      },
    ]);
  });
});
