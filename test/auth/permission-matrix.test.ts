import { randomUUID } from 'node:crypto';
import { SignJWT, decodeJwt, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { ADMIN, CHANNEL, EDITOR, READER } from '../helpers/roles.js';

/**
 * Every route × every kind of credential → the answer docs/security.md demands. The routes come from the
 * app's own route table, so a route added without an entry in EXPECTED fails here.
 */

/**
 * 'describes caller': public, but credentials sent are checked (401 when invalid), since the answer is about the caller.
 * 'authenticated': any valid credential, whatever its scopes (401 without one or with an invalid one; never 403).
 */
type Needs = 'public' | 'describes caller' | 'authenticated' | string[];

/** What each route needs, as docs/security.md reads: a route that addresses a record also needs read on its collection. */
const EXPECTED: Record<string, Needs> = {
  'GET /': 'public',
  'HEAD /': 'public',
  'GET /v1': 'public',
  'HEAD /v1': 'public',
  'GET /problems/:type': 'public',
  'HEAD /problems/:type': 'public',
  'GET /docs': 'public',
  'HEAD /docs': 'public',
  'GET /docs/init.js': 'public',
  'HEAD /docs/init.js': 'public',
  'GET /docs/:asset': 'public',
  'HEAD /docs/:asset': 'public',
  'GET /console': 'public',
  'HEAD /console': 'public',
  'GET /console/assets/:asset': 'public',
  'HEAD /console/assets/:asset': 'public',
  'GET /health/live': 'public',
  'HEAD /health/live': 'public',
  'GET /health/ready': 'public',
  'HEAD /health/ready': 'public',
  'GET /v1/limits': 'describes caller',
  'HEAD /v1/limits': 'describes caller',
  'GET /v1/openapi.json': 'public',
  'HEAD /v1/openapi.json': 'public',
  'POST /oauth/token': 'public',
  'GET /.well-known/jwks.json': 'public',
  'HEAD /.well-known/jwks.json': 'public',
  'GET /.well-known/oauth-authorization-server': 'public',
  'HEAD /.well-known/oauth-authorization-server': 'public',

  'GET /v1/users': ['users:read'],
  'HEAD /v1/users': ['users:read'],
  'POST /v1/users': ['users:create'],
  'GET /v1/users/me': ['users:read'],
  'HEAD /v1/users/me': ['users:read'],
  'GET /v1/users/:id': ['users:read'],
  'HEAD /v1/users/:id': ['users:read'],
  'PUT /v1/users/:id': ['users:update', 'users:read'],
  'PATCH /v1/users/:id': ['users:update', 'users:read'],
  'DELETE /v1/users/:id': ['users:delete', 'users:read'],
  'POST /v1/users/batch': ['users:update', 'users:read'],

  'GET /v1/items': ['items:read'],
  'HEAD /v1/items': ['items:read'],
  'POST /v1/items': ['items:create'],
  'GET /v1/items/:id': ['items:read'],
  'HEAD /v1/items/:id': ['items:read'],
  'PUT /v1/items/:id': ['items:update', 'items:read'],
  'PATCH /v1/items/:id': ['items:update', 'items:read'],
  'DELETE /v1/items/:id': ['items:delete', 'items:read'],
  'POST /v1/items/batch': ['items:update', 'items:read'],
  'POST /v1/items/stock/batch': ['stock:update', 'items:read', 'stock:read'],
  'POST /v1/users/import': ['users:create', 'users:update'],
  'POST /v1/items/import': ['items:create', 'items:update', 'stock:update'],
  'POST /v1/orders/import': ['orders:create', 'users:read', 'items:read'],
  'POST /v1/items/stock/import': ['stock:update', 'items:read'],

  'GET /v1/operations': ['operations:read'],
  'HEAD /v1/operations': ['operations:read'],
  'GET /v1/operations/:id': ['operations:read'],
  'HEAD /v1/operations/:id': ['operations:read'],
  'POST /v1/operations/:id/cancel': ['operations:update', 'operations:read'],
  'DELETE /v1/operations/:id': ['operations:update', 'operations:read'],
  'GET /v1/operations/:id/errors': ['operations:read'],
  'HEAD /v1/operations/:id/errors': ['operations:read'],
  'POST /v1/backups': ['backups:create'],
  'GET /v1/backups': ['backups:read'],
  'HEAD /v1/backups': ['backups:read'],
  'GET /v1/backups/:name': ['backups:read'],
  'HEAD /v1/backups/:name': ['backups:read'],

  'GET /v1/items/stock': ['stock:read', 'items:read'],
  'HEAD /v1/items/stock': ['stock:read', 'items:read'],
  'GET /v1/items/:id/stock': ['stock:read', 'items:read'],
  'HEAD /v1/items/:id/stock': ['stock:read', 'items:read'],
  'PUT /v1/items/:id/stock': ['stock:update', 'items:read', 'stock:read'],
  'PATCH /v1/items/:id/stock': ['stock:update', 'items:read', 'stock:read'],
  'GET /v1/items/:id/stock/movements': ['stock:read', 'items:read'],
  'HEAD /v1/items/:id/stock/movements': ['stock:read', 'items:read'],

  'GET /v1/orders': ['orders:read'],
  'HEAD /v1/orders': ['orders:read'],
  'POST /v1/orders': ['orders:create'],
  'GET /v1/orders/:id': ['orders:read'],
  'HEAD /v1/orders/:id': ['orders:read'],
  'PUT /v1/orders/:id': ['orders:update', 'orders:read'],
  'PATCH /v1/orders/:id': ['orders:update', 'orders:read'],
  'DELETE /v1/orders/:id': ['orders:delete', 'orders:read'],
  'POST /v1/orders/batch': ['orders:update', 'orders:read'],
  'POST /v1/orders/:id/cancel': ['orders:cancel', 'orders:read'],
  'GET /v1/weather': ['weather:read'],
  'HEAD /v1/weather': ['weather:read'],
  'GET /v1/weather/:place': ['weather:read'],
  'HEAD /v1/weather/:place': ['weather:read'],
  'PUT /v1/weather/:place': ['weather:update', 'weather:read'],
  'PATCH /v1/weather/:place': ['weather:update', 'weather:read'],
  'DELETE /v1/weather/:place': ['weather:delete', 'weather:read'],
  'GET /v1/weather/:place/observations': ['weather:read'],
  'HEAD /v1/weather/:place/observations': ['weather:read'],

  'GET /v1/callers/me': 'authenticated',
  'HEAD /v1/callers/me': 'authenticated',
  'GET /v1/callers': ['callers:read'],
  'HEAD /v1/callers': ['callers:read'],
  'POST /v1/callers': ['callers:create'],
  'GET /v1/callers/:id': ['callers:read'],
  'HEAD /v1/callers/:id': ['callers:read'],
  'PATCH /v1/callers/:id': ['callers:update', 'callers:read'],
  'DELETE /v1/callers/:id': ['callers:delete', 'callers:read'],
  'GET /v1/callers/:id/keys': ['callers:read'],
  'HEAD /v1/callers/:id/keys': ['callers:read'],
  'POST /v1/callers/:id/keys': ['callers:create', 'callers:read'],
  'GET /v1/callers/:id/keys/:key_id': ['callers:read'],
  'HEAD /v1/callers/:id/keys/:key_id': ['callers:read'],
  'DELETE /v1/callers/:id/keys/:key_id': ['callers:delete', 'callers:read'],

  'GET /metrics': ['metrics:read'],
  'HEAD /metrics': ['metrics:read'],
  'GET /v1/audit-events': ['audit-events:read'],
  'HEAD /v1/audit-events': ['audit-events:read'],

  'GET /v1/events': ['events:read'],
  'HEAD /v1/events': ['events:read'],
  'GET /v1/events/stream': ['events:read'],
  'HEAD /v1/events/stream': ['events:read'],
  'GET /v1/events/:id': ['events:read'],
  'HEAD /v1/events/:id': ['events:read'],
  'GET /v1/event-types': 'public',
  'HEAD /v1/event-types': 'public',

  'GET /v1/webhook-endpoints': ['webhook-endpoints:read'],
  'HEAD /v1/webhook-endpoints': ['webhook-endpoints:read'],
  'POST /v1/webhook-endpoints': ['webhook-endpoints:create'],
  'GET /v1/webhook-endpoints/:id': ['webhook-endpoints:read'],
  'HEAD /v1/webhook-endpoints/:id': ['webhook-endpoints:read'],
  'PATCH /v1/webhook-endpoints/:id': ['webhook-endpoints:update', 'webhook-endpoints:read'],
  'DELETE /v1/webhook-endpoints/:id': ['webhook-endpoints:delete', 'webhook-endpoints:read'],
  'POST /v1/webhook-endpoints/:id/rotate-secret': ['webhook-endpoints:update', 'webhook-endpoints:read'],
  'POST /v1/webhook-endpoints/:id/ping': ['webhook-endpoints:update', 'webhook-endpoints:read'],
  'GET /v1/webhook-endpoints/:id/health': ['webhook-endpoints:read'],
  'HEAD /v1/webhook-endpoints/:id/health': ['webhook-endpoints:read'],
  'GET /v1/webhook-endpoints/:id/deliveries': ['webhook-endpoints:read'],
  'HEAD /v1/webhook-endpoints/:id/deliveries': ['webhook-endpoints:read'],
  'GET /v1/webhook-endpoints/:id/deliveries/:delivery_id': ['webhook-endpoints:read'],
  'HEAD /v1/webhook-endpoints/:id/deliveries/:delivery_id': ['webhook-endpoints:read'],
  'POST /v1/webhook-endpoints/:id/deliveries/:delivery_id/retry': [
    'webhook-endpoints:update',
    'webhook-endpoints:read',
  ],
};

/** docs/security.md's roles, written out in the tests rather than taken from src/auth/policy.ts. */
const ROLE_SCOPES = { reader: READER, editor: EDITOR, admin: ADMIN, channel: CHANNEL };

/** How a credential is sent, and what it should be: refused outright, or a caller holding these scopes. */
interface Credential {
  name: string;
  headers: Record<string, string>;
  outcome:
    | { refused: 'missing-credentials' }
    | { refused: 'invalid-credentials'; because: RegExp }
    | { holds: ReadonlySet<string> };
}

/** The records a credential's requests address; fresh for each credential, so deletes by one never affect another. */
interface Targets {
  userId: number;
  itemId: number;
  orderId: number;
  callerId: number;
  keyId: number;
  place: string;
  endpointId: number;
  deliveryId: number;
  operationId: number;
}

interface Cell {
  route: string;
  credential: string;
  expected: string;
  status: number;
  type: string;
  problem: string;
}

let test: TestApp;
/** A reader caller whose name and key /oauth/token is asked for a token in every cell. */
let tokenClient: { name: string; key: string };
let credentials: Credential[];

beforeAll(async () => {
  test = await startApp();
  const client = await createCallerWithKey(test, { role: 'reader' });
  tokenClient = { name: client.caller.name, key: client.key };

  const revoked = await createCallerWithKey(test, { role: 'admin' });
  const revocation = await test.call({
    method: 'DELETE',
    url: `/v1/callers/${revoked.caller.id}/keys/${revoked.keyId}`,
  });
  if (revocation.status !== 204) throw new Error(`could not revoke the key: ${revocation.status} ${revocation.text}`);

  const caller = async (options: Parameters<typeof createCallerWithKey>[1]) => ({
    'x-api-key': (await createCallerWithKey(test, options)).key,
  });
  const holding = (role: keyof typeof ROLE_SCOPES, extra: string[] = [], removed: string[] = []) =>
    new Set([...ROLE_SCOPES[role], ...extra].filter((scope) => !removed.includes(scope)));

  credentials = [
    { name: 'none', headers: {}, outcome: { refused: 'missing-credentials' } },
    {
      name: 'malformed key',
      headers: { 'x-api-key': 'rowi_bad' },
      outcome: { refused: 'invalid-credentials', because: /not one rowi issued/ },
    },
    // An admin's key, so nothing but the revocation can be the reason it is refused.
    {
      name: 'revoked key',
      headers: { 'x-api-key': revoked.key },
      outcome: { refused: 'invalid-credentials', because: /revoked/ },
    },
    {
      name: 'expired JWT',
      headers: { authorization: `Bearer ${await adminToken({ expiresIn: -120 })}` },
      outcome: { refused: 'invalid-credentials', because: /expired/ },
    },
    {
      name: 'JWT for other audience',
      headers: { authorization: `Bearer ${await adminToken({ audience: 'https://elsewhere.example' })}` },
      outcome: { refused: 'invalid-credentials', because: /audience/ },
    },
    { name: 'reader', headers: await caller({ role: 'reader' }), outcome: { holds: holding('reader') } },
    { name: 'editor', headers: await caller({ role: 'editor' }), outcome: { holds: holding('editor') } },
    { name: 'admin', headers: { 'x-api-key': test.adminKey }, outcome: { holds: holding('admin') } },
    { name: 'channel', headers: await caller({ role: 'channel' }), outcome: { holds: holding('channel') } },
    {
      name: 'editor +orders:delete',
      headers: await caller({ role: 'editor', extra_scopes: ['orders:delete'] }),
      outcome: { holds: holding('editor', ['orders:delete']) },
    },
    {
      name: 'editor -users:read',
      headers: await caller({ role: 'editor', removed_scopes: ['users:read'] }),
      outcome: { holds: holding('editor', [], ['users:read']) },
    },
  ];
});
afterAll(async () => test.close());

/**
 * A token forged with rowi's own signing key and the claims of a real admin token, changed only
 * where asked: so an expired or foreign-audience token is refused for that reason alone.
 */
async function adminToken(change: { expiresIn?: number; audience?: string } = {}): Promise<string> {
  const form = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: 'admin',
    client_secret: test.adminKey,
  });
  const issued = await test.call({
    method: 'POST',
    url: '/oauth/token',
    key: null,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
  });
  if (issued.status !== 200) throw new Error(`could not get a token: ${issued.status} ${issued.text}`);
  const real = issued.json.access_token as string;
  const { kid } = decodeProtectedHeader(real);
  const claims = decodeJwt(real);
  const row = await test.storage.db
    .selectFrom('signing_keys')
    .select('private_jwk')
    .where('kid', '=', kid!)
    .executeTakeFirstOrThrow();
  const signingKey = await importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256');
  const now = Math.floor(Date.now() / 1000);
  const expires = now + (change.expiresIn ?? 600);
  return new SignJWT({ scope: claims.scope, client_id: claims.client_id })
    .setProtectedHeader({ alg: 'ES256', kid: kid!, typ: 'at+jwt' })
    .setIssuer(claims.iss!)
    .setAudience(change.audience ?? claims.aud!)
    .setSubject(claims.sub!)
    .setIssuedAt(Math.min(now, expires - 900))
    .setExpirationTime(expires)
    .setJti(randomUUID())
    .sign(signingKey);
}

let places = 0;

/** Records for one credential's requests to address: none of them is a caller or key the matrix calls with. */
async function createTargets(): Promise<Targets> {
  const user = (await createUser(test)).user;
  const item = (await createItem(test)).item;
  await setStock(test, item.id, 5);
  // The order has its own user and item, so deleting the target user or item is not blocked by it.
  const buyer = (await createUser(test)).user;
  const sold = (await createItem(test)).item;
  await setStock(test, sold.id, 5);
  const order = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'SO-matrix', user_id: buyer.id, lines: [{ item_id: sold.id, quantity: 1 }] },
  });
  if (order.status !== 201) throw new Error(`could not place the order: ${order.status} ${order.text}`);
  const target = await createCallerWithKey(test, { role: 'reader' });
  const place = `matrix-${++places}`;
  const created = await test.call({
    method: 'PATCH',
    url: `/v1/weather/${place}`,
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ name: 'Matrix' }),
  });
  if (created.status !== 201) throw new Error(`could not create the place: ${created.status} ${created.text}`);
  const endpoint = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: 'https://hooks.example.com/matrix' },
  });
  if (endpoint.status !== 201)
    throw new Error(`could not create the webhook endpoint: ${endpoint.status} ${endpoint.text}`);
  const ping = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.json.id}/ping` });
  if (ping.status !== 202) throw new Error(`could not ping the webhook endpoint: ${ping.status} ${ping.text}`);
  const operation = await test.call({
    method: 'POST',
    url: '/v1/items/import?dry_run=true',
    headers: { 'content-type': 'text/csv' },
    body: 'sku,name,price\nMATRIX-1,Matrix,1.00\n',
  });
  if (operation.status !== 202) throw new Error(`could not start an import: ${operation.status} ${operation.text}`);
  return {
    operationId: operation.json.id as number,
    userId: user.id,
    itemId: item.id,
    orderId: order.json.id as number,
    callerId: target.caller.id,
    keyId: target.keyId,
    place,
    endpointId: endpoint.json.id,
    deliveryId: ping.json.id,
  };
}

function concreteUrl(url: string, targets: Targets): string {
  const collection = /^\/v1\/([a-z-]+)\/:id/.exec(url)?.[1];
  const ids: Record<string, number | string> = {
    users: targets.userId,
    items: targets.itemId,
    orders: targets.orderId,
    callers: targets.callerId,
    'webhook-endpoints': targets.endpointId,
    operations: targets.operationId,
    events: `evt_${'0'.repeat(28)}`,
  };
  // The stream, for a caller it lets through, would stay open: an unknown type makes that a 400 (after authentication).
  if (url === '/v1/events/stream') return `${url}?types=no.such-type`;
  return url
    .replace(':delivery_id', String(targets.deliveryId))
    .replace(':type', 'not-found')
    .replace(':place', targets.place)
    .replace(':key_id', String(targets.keyId))
    .replace(':name', 'rowi-matrix.sqlite')
    .replace(':id', () => {
      const id = collection === undefined ? undefined : ids[collection];
      if (id === undefined) throw new Error(`no target record for ${url}: add one to createTargets()`);
      return String(id);
    });
}

async function send(method: string, url: string, credential: Credential): Promise<Reply> {
  const key = null;
  if (url === '/oauth/token') {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: tokenClient.name,
      client_secret: tokenClient.key,
    });
    return test.call({
      method: 'POST',
      url,
      key,
      headers: { ...credential.headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
  }
  if (method === 'PATCH') {
    return test.call({
      method,
      url,
      key,
      headers: { ...credential.headers, 'content-type': 'application/merge-patch+json' },
      body: '{}',
    });
  }
  if (method === 'POST' || method === 'PUT')
    return test.call({ method, url, key, headers: credential.headers, body: {} });
  return test.call({ method: method as 'GET' | 'HEAD' | 'DELETE', url, key, headers: credential.headers });
}

/** Deletes go last, and a key before its caller, so each credential's other requests still find their records. */
function executionOrder(route: { method: string; url: string }): number {
  if (route.method !== 'DELETE') return 0;
  return route.url.includes(':key_id') ? 1 : 2;
}

/** What is wrong with this answer; empty when it is what docs/security.md asks for. */
function check(
  method: string,
  needs: Needs,
  credential: Credential,
  reply: Reply,
): { expected: string; wrong: string[] } {
  const wrong: string[] = [];
  const challenge = String(reply.headers['www-authenticate'] ?? '');
  const type = String(reply.json?.type ?? '');
  const hasBody = method !== 'HEAD';
  const allowed = (expected: string) => {
    if (reply.status === 401 || reply.status === 403) wrong.push(`refused (${reply.status})`);
    if (reply.status >= 500) wrong.push(`server error ${reply.status}`);
    return { expected, wrong };
  };
  if (needs === 'public') return allowed('public: not 401/403');
  const { outcome } = credential;
  if (needs === 'describes caller') {
    if (!('refused' in outcome) || outcome.refused === 'missing-credentials') return allowed('public: not 401/403');
    if (reply.status !== 401) wrong.push(`status ${reply.status} ≠ 401`);
    if (hasBody && type !== `/problems/${outcome.refused}`) wrong.push(`type ${type || '(none)'}`);
    return { expected: `401 ${outcome.refused}`, wrong };
  }
  if ('refused' in outcome) {
    if (reply.status !== 401) wrong.push(`status ${reply.status} ≠ 401`);
    if (!challenge.startsWith('Bearer realm="rowi"')) wrong.push(`WWW-Authenticate ${JSON.stringify(challenge)}`);
    if (outcome.refused === 'invalid-credentials' && !challenge.includes('error="invalid_token"'))
      wrong.push('challenge lacks error="invalid_token"');
    if (outcome.refused === 'missing-credentials' && challenge.includes('error='))
      wrong.push('challenge names an error though no credentials were sent (RFC 6750 §3.1)');
    if (hasBody && type !== `/problems/${outcome.refused}`) wrong.push(`type ${type || '(none)'}`);
    if (hasBody && 'because' in outcome && !outcome.because.test(String(reply.json?.detail)))
      wrong.push(`detail ${JSON.stringify(reply.json?.detail)}`);
    return { expected: `401 ${outcome.refused}`, wrong };
  }
  if (needs === 'authenticated') return allowed('any credential: not 401/403');
  const missing = needs.filter((scope) => !outcome.holds.has(scope)).sort();
  if (missing.length === 0) return allowed('allowed: not 401/403');
  if (reply.status !== 403) wrong.push(`status ${reply.status} ≠ 403`);
  const scopeParameter = /scope="([^"]*)"/.exec(challenge)?.[1];
  if (
    !challenge.includes('error="insufficient_scope"') ||
    scopeParameter?.split(' ').sort().join(' ') !== missing.join(' ')
  ) {
    wrong.push(`WWW-Authenticate ${JSON.stringify(challenge)}`);
  }
  if (hasBody && type !== '/problems/insufficient-scope') wrong.push(`type ${type || '(none)'}`);
  if (
    hasBody &&
    JSON.stringify([...((reply.json?.required_scopes as string[] | undefined) ?? [])].sort()) !==
      JSON.stringify(missing)
  ) {
    wrong.push(`required_scopes ${JSON.stringify(reply.json?.required_scopes)}`);
  }
  return { expected: `403 lacks ${missing.join(' ')}`, wrong };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')).join('\n');
}

describe('permission matrix (docs/security.md)', () => {
  it('route table: every registered route has an entry in EXPECTED, and every entry is a registered route', () => {
    const registered = test.app.routeTable.list().map((route) => `${route.method} ${route.url}`);
    const unlisted = registered.filter((route) => !(route in EXPECTED));
    const stale = Object.keys(EXPECTED).filter((route) => !registered.includes(route));
    expect({ 'routes without an EXPECTED entry': unlisted, 'EXPECTED entries with no route': stale }).toEqual({
      'routes without an EXPECTED entry': [],
      'EXPECTED entries with no route': [],
    });
    expect(new Set(registered).size).toBe(registered.length);
  });

  it('forged tokens: accepted when only the claims under test are left as issued (so the refusals below are for exp and aud alone)', async () => {
    const reply = await test.call({
      method: 'GET',
      url: '/v1/audit-events',
      key: null,
      headers: { authorization: `Bearer ${await adminToken()}` },
    });
    expect(reply.status).toBe(200);
  });

  it('every route × credential: 401 missing/invalid, 403 insufficient-scope or let through, as docs/security.md says, when called with each of 11 credentials', async () => {
    const routes = test.app.routeTable.list().sort((a, b) => executionOrder(a) - executionOrder(b));
    const cells: Cell[] = [];
    const mismatches: string[][] = [['route', 'credential', 'expected', 'got']];
    for (const credential of credentials) {
      const targets = await createTargets();
      for (const { method, url } of routes) {
        const route = `${method} ${url}`;
        const needs = EXPECTED[route];
        if (needs === undefined) {
          mismatches.push([route, credential.name, '(no EXPECTED entry)', '-']);
          continue;
        }
        const reply = await send(method, concreteUrl(url, targets), credential);
        const { expected, wrong } = check(method, needs, credential, reply);
        const problem = String(reply.json?.type ?? '').replace('/problems/', '');
        cells.push({
          route,
          credential: credential.name,
          expected,
          status: reply.status,
          type: problem,
          problem: wrong.join('; '),
        });
        if (wrong.length > 0)
          mismatches.push([route, credential.name, expected, `${reply.status} ${problem}: ${wrong.join('; ')}`]);
      }
    }
    if (process.env.ROWI_TEST_PRINT_MATRIX) {
      const names = credentials.map((credential) => credential.name);
      const rows = routes.map(({ method, url }) => [
        `${method} ${url}`,
        ...names.map((name) =>
          String(cells.find((cell) => cell.route === `${method} ${url}` && cell.credential === name)?.status ?? '-'),
        ),
      ]);
      console.log(
        `${routes.length} routes × ${credentials.length} credentials = ${cells.length} requests\n${table([['route', ...names], ...rows])}`,
      );
    }
    expect(cells.length).toBe(routes.length * credentials.length);
    expect(mismatches.length === 1 ? '' : `\n${table(mismatches)}`).toBe('');
  });
});
