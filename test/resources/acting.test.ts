import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type Reply, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';
import { createCallerThroughApi, createWithKey } from '../helpers/records.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { SseClient } from '../helpers/sse.js';
import { createEndpoint, deliverMarker, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

/**
 * Acting for a user (docs/access.md): a token rowi issues with user_id, or an external issuer's
 * token whose ROWI_JWT_USER_CLAIM names the user, sees that user's record and orders only; what it
 * places is that user's; the audit trail names the caller and the user. And the events of owned
 * records go to exactly who sees the record: an own-only caller's webhooks and streams, a token
 * acting for a user's stream, and a caller whose access drops from all to own stops receiving
 * another's at once. One app for the file; the same file runs on PostgreSQL.
 */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUDIENCE = 'https://rowi.test/api';
let test: TestApp;
let issuer: LocalIssuer;
let origin: string;
const shop = { id: 0, key: '' };
const market = { id: 0, key: '' };
let ada: Row;
let bob: Row;
let item: Row;
let adaToken = '';
const receivers: Receiver[] = [];

const caller = (name: string, body: Row) => createCallerThroughApi(test, name, body);

const make = (key: string, url: string, body: unknown) => createWithKey(test, key, url, body);

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const orderFor = (userId: number, name = 'o') => ({
  name,
  user_id: userId,
  lines: [{ item_id: item.id, quantity: 1 }],
});

function tokenRequest(name: string, key: string, fields: Record<string, string>): Promise<Reply> {
  return test.call({
    method: 'POST',
    url: '/oauth/token',
    key: null,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: name,
      client_secret: key,
      ...fields,
    }).toString(),
  });
}

beforeAll(async () => {
  issuer = await startIssuer({ audience: AUDIENCE });
  test = await startApp({
    ...WEBHOOK_SETTINGS,
    ROWI_JWT_ISSUER: issuer.url,
    ROWI_JWT_AUDIENCE: AUDIENCE,
    ROWI_JWT_JWKS_URL: issuer.jwksUrl,
    ROWI_JWT_USER_CLAIM: 'rowi_user',
    ROWI_AUDIT_FLUSH_INTERVAL: '50',
    // Load shedding has its own tests; on a busy machine its 503s would only hide these answers.
    ROWI_MAX_EVENT_LOOP_DELAY: '0',
  });
  origin = await listenOnLoopback(test);
  Object.assign(shop, await caller('web-shop', { role: 'channel', extra_scopes: ['users:act', 'events:read'] }));
  Object.assign(market, await caller('marketplace', { role: 'channel', extra_scopes: ['users:act', 'events:read'] }));
  item = await make(test.adminKey, '/v1/items', { name: 'Mug', sku: 'MUG-1', price: '4.00' });
  await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 1000 } });
  ada = await make(shop.key, '/v1/users', { name: 'Ada', email: 'ada@example.com' });
  bob = await make(market.key, '/v1/users', { name: 'Bob', email: 'bob@example.com' });
  adaToken = await issueToken(test, { name: 'web-shop' }, shop.key, { user_id: String(ada.id) });
});
afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.stop()));
  await test?.close();
  await issuer?.close();
});

describe('POST /oauth/token with user_id', () => {
  it('POST /oauth/token: 400 invalid_request, the same answer, for a user the caller cannot see and one that does not exist', async () => {
    const hidden = await tokenRequest('web-shop', shop.key, { user_id: String(bob.id) });
    const never = await tokenRequest('web-shop', shop.key, { user_id: '987654321' });
    expect(hidden.status).toBe(400);
    expect(hidden.json).toEqual({ error: 'invalid_request', error_description: `There is no user ${bob.id}.` });
    expect(never.json).toEqual({ error: 'invalid_request', error_description: 'There is no user 987654321.' });
  });

  it('POST /oauth/token: 400 invalid_scope when the caller lacks users:act, 400 invalid_request for a user_id that is no id', async () => {
    const plain = await caller('plain-channel', { role: 'channel' });
    const refused = await tokenRequest('plain-channel', plain.key, { user_id: String(ada.id) });
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({
      error: 'invalid_scope',
      error_description: 'The caller does not hold users:act, which user_id needs.',
    });
    for (const bad of ['0', '-1', 'ada', '1.5', '99999999999999999'])
      expect((await tokenRequest('web-shop', shop.key, { user_id: bad })).json.error).toBe('invalid_request');
  });
});

describe('what a token acting for a user sees and does', () => {
  it('GET /v1/users/me: the user the token acts for, with its ETag and 304; 404 for a request that acts for nobody', async () => {
    const me = await test.call({ url: '/v1/users/me', headers: bearer(adaToken) });
    expect(me.status).toBe(200);
    expect(me.json).toEqual(ada);
    const again = await test.call({
      url: '/v1/users/me',
      headers: { ...bearer(adaToken), 'if-none-match': String(me.headers.etag) },
    });
    expect(again.status).toBe(304);
    const nobody = await test.call({ url: '/v1/users/me', key: shop.key });
    expect(nobody.status).toBe(404);
    expect(nobody.json.type).toBe('/problems/not-found');
  });

  it("POST /v1/orders: the order is the user's (user_id) and its caller's (created_by); another user, even one the caller sees, is 422 unknown-reference", async () => {
    const carl = await make(shop.key, '/v1/users', { name: 'Carl', email: 'carl@example.com' });
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: bearer(adaToken),
      body: orderFor(ada.id, 'ada-1'),
    });
    expect(placed.status, placed.text).toBe(201);
    expect(placed.json).toMatchObject({ user_id: ada.id, created_by: shop.id });
    const before = await test.storage.db.selectFrom('orders').select('id').execute();
    const forCarl = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: bearer(adaToken),
      body: orderFor(carl.id),
    });
    expect(forCarl.status).toBe(422);
    expect(forCarl.json.type).toBe('/problems/unknown-reference');
    expect(await test.storage.db.selectFrom('orders').select('id').execute()).toEqual(before);
    // The shop itself (no user) sees Carl and its order for Ada; the token sees Ada's orders only.
    const carlsOrder = await make(shop.key, '/v1/orders', orderFor(carl.id, 'carl-1'));
    const listed = await test.call({ url: '/v1/orders', headers: bearer(adaToken) });
    expect(listed.json.data.map((order: Row) => order.user_id)).toEqual(listed.json.data.map(() => ada.id));
    expect(listed.json.data.map((order: Row) => order.id)).toContain(placed.json.id);
    expect((await test.call({ url: `/v1/orders/${carlsOrder.id}`, headers: bearer(adaToken) })).status).toBe(404);
    expect((await test.call({ url: '/v1/users', headers: bearer(adaToken) })).json.data).toEqual([ada]);
  });

  it('Idempotency-Key: a key used by the caller for itself never replays to its token acting for a user, nor the other way', async () => {
    const headers = { 'idempotency-key': `same-key-${Date.now()}` };
    const forAda = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: { ...headers, ...bearer(adaToken) },
      body: orderFor(ada.id, 'keyed'),
    });
    const bySelf = await test.call({
      method: 'POST',
      url: '/v1/orders',
      key: shop.key,
      headers,
      body: orderFor(ada.id, 'keyed'),
    });
    expect([forAda.status, bySelf.status]).toEqual([201, 201]);
    expect(bySelf.headers['idempotent-replayed']).toBeUndefined();
    expect(bySelf.json.id).not.toBe(forAda.json.id);
  });

  it('GET /v1/audit-events: a request acting for a user names the caller (actor) and the user (subject)', async () => {
    await test.call({ url: '/v1/users/me', headers: bearer(adaToken) });
    const events = await eventually(
      async () => (await test.call({ url: `/v1/audit-events?user_id=${ada.id}&limit=500` })).json.data as Row[],
      (rows) => rows.some((row) => row.path === '/v1/users/me' && row.status === 200),
    );
    expect(events.find((row) => row.path === '/v1/users/me' && row.status === 200)).toMatchObject({
      caller_id: shop.id,
      caller_name: 'web-shop',
      credential: 'oauth',
      user_id: ada.id,
      status: 200,
    });
    const own = (await test.call({ url: `/v1/audit-events?caller_id=${shop.id}&limit=500` })).json.data as Row[];
    expect(own.some((row) => row.user_id === null)).toBe(true);
  });

  it('POST /v1/webhook-endpoints: 403 for a request acting for a user, whose token carries no webhook-endpoints scope (an endpoint acts for a caller)', async () => {
    const granted = await caller('hooked-shop', {
      role: 'channel',
      extra_scopes: ['users:act', 'events:read', 'webhook-endpoints:create'],
    });
    const customer = await make(granted.key, '/v1/users', { name: 'Dee', email: 'dee@example.com' });
    const token = await issueToken(test, { name: 'hooked-shop' }, granted.key, { user_id: String(customer.id) });
    const refused = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      headers: bearer(token),
      body: { url: 'http://127.0.0.1:9/', events: ['order.created'] },
    });
    expect(refused.status).toBe(403);
    expect(refused.json.type).toBe('/problems/insufficient-scope');
    expect(refused.json.required_scopes).toEqual(['webhook-endpoints:create']);
    expect((await test.call({ url: '/v1/webhook-endpoints' })).json.data).toEqual([]);
  });

  it("POST /oauth/token, GET /v1/callers, /v1/audit-events, /metrics: an admin's token acting for a user carries only the scopes of records; asking for another with user_id is 400 invalid_scope", async () => {
    const admin = await caller('acting-admin', { role: 'admin' });
    const issued = await tokenRequest('acting-admin', admin.key, { user_id: String(ada.id) });
    expect(issued.status).toBe(200);
    const carried = (issued.json.scope as string).split(' ');
    expect(carried).toEqual(
      expect.arrayContaining(['users:read', 'orders:create', 'orders:cancel', 'events:read', 'operations:read']),
    );
    for (const scope of [
      'callers:read',
      'audit-events:read',
      'metrics:read',
      'backups:read',
      'webhook-endpoints:read',
      'users:act',
    ])
      expect(carried).not.toContain(scope);
    const token = bearer(issued.json.access_token as string);
    for (const [url, scope] of [
      ['/v1/callers', 'callers:read'],
      ['/v1/audit-events', 'audit-events:read'],
      ['/metrics', 'metrics:read'],
      ['/v1/backups', 'backups:read'],
      ['/v1/webhook-endpoints', 'webhook-endpoints:read'],
    ] as const) {
      const refused = await test.call({ url, headers: { ...token, accept: 'application/json' } });
      expect(refused.status, url).toBe(403);
      expect(refused.json.required_scopes, url).toEqual([scope]);
    }
    expect((await test.call({ url: '/v1/users/me', headers: token })).json.id).toBe(ada.id);
    const asked = await tokenRequest('acting-admin', admin.key, {
      user_id: String(ada.id),
      scope: 'users:read callers:read',
    });
    expect(asked.status).toBe(400);
    expect(asked.json).toEqual({
      error: 'invalid_scope',
      error_description: "A token acting for a user cannot carry callers:read: acting is for one user's records.",
    });
    // The same admin without user_id keeps everything it holds.
    const plain = await tokenRequest('acting-admin', admin.key, { scope: 'callers:read' });
    expect(plain.status).toBe(200);
  });

  it('GET /v1/audit-events: 403 for an external token acting for a user, whatever scopes its issuer gave', async () => {
    const token = await issuer.sign({
      sub: 'ada@idp',
      rowi_user: String(ada.id),
      scope: 'users:read audit-events:read',
    });
    const refused = await test.call({ url: '/v1/audit-events', headers: bearer(token) });
    expect(refused.status).toBe(403);
    expect((await test.call({ url: '/v1/users/me', headers: bearer(token) })).status).toBe(200);
  });

  it('a token acting for a user stops working (401) once its caller loses users:act', async () => {
    const lender = await caller('lending-shop', { role: 'channel', extra_scopes: ['users:act'] });
    const customer = await make(lender.key, '/v1/users', { name: 'Eve', email: 'eve@example.com' });
    const token = await issueToken(test, { name: 'lending-shop' }, lender.key, { user_id: String(customer.id) });
    expect((await test.call({ url: '/v1/users/me', headers: bearer(token) })).status).toBe(200);
    const narrowed = await test.call({ method: 'PATCH', url: `/v1/callers/${lender.id}`, body: { extra_scopes: [] } });
    expect(narrowed.status).toBe(200);
    const refused = await test.call({ url: '/v1/users/me', headers: bearer(token) });
    expect(refused.status).toBe(401);
    expect(refused.json.detail).toBe("The token's caller may no longer act for users (users:act).");
  });
});

describe('acting narrows: a token acting for a user never sees more than its caller', () => {
  it("GET /v1/orders/{id}: 404 to a channel's key and to its token acting for the customer, as for an order that does not exist, when the admin placed the order for the channel's customer", async () => {
    const placedByAdmin = await make(test.adminKey, '/v1/orders', orderFor(ada.id, 'admin-for-ada'));
    for (const credentials of [{ key: shop.key }, { headers: bearer(adaToken) }]) {
      const hidden = await test.call({ url: `/v1/orders/${placedByAdmin.id}`, ...credentials });
      const never = await test.call({ url: '/v1/orders/987654321', ...credentials });
      expect(hidden.status).toBe(404);
      expect(hidden.json.detail).toBe(never.json.detail.replace('987654321', String(placedByAdmin.id)));
      const listed = (await test.call({ url: '/v1/orders?limit=500', ...credentials })).json.data as Row[];
      expect(listed.map((order) => order.id)).not.toContain(placedByAdmin.id);
    }
  });

  it("GET /v1/orders/{id}: 200 to an all-records caller's token acting for the user, for an order another caller placed for that user; its other users' orders stay 404", async () => {
    const hub = await caller('hub', { role: 'editor', extra_scopes: ['users:act'] });
    const placedByAdmin = await make(test.adminKey, '/v1/orders', orderFor(ada.id, 'admin-for-ada-2'));
    const placedForBob = await make(test.adminKey, '/v1/orders', orderFor(bob.id, 'admin-for-bob'));
    const token = await issueToken(test, { name: 'hub' }, hub.key, { user_id: String(ada.id) });
    const seen = await test.call({ url: `/v1/orders/${placedByAdmin.id}`, headers: bearer(token) });
    expect(seen.status).toBe(200);
    expect(seen.json).toMatchObject({ id: placedByAdmin.id, user_id: ada.id, created_by: placedByAdmin.created_by });
    expect((await test.call({ url: `/v1/orders/${placedForBob.id}`, headers: bearer(token) })).status).toBe(404);
  });
});

describe('what a token acting for a user may create: orders for its user, no users and no items', () => {
  let hubToken = '';
  let hubCustomer: Row;
  beforeAll(async () => {
    const hub = await caller('creating-hub', { role: 'editor', extra_scopes: ['users:act'] });
    hubCustomer = await make(hub.key, '/v1/users', { name: 'Hilda', email: 'hilda@example.com' });
    hubToken = await issueToken(test, { name: 'creating-hub' }, hub.key, { user_id: String(hubCustomer.id) });
  });
  const counts = async () => ({
    users: (await test.storage.db.selectFrom('users').select('id').execute()).length,
    items: (await test.storage.db.selectFrom('items').select('id').execute()).length,
  });

  it.each([
    ['POST', '/v1/users', { name: 'Mallory', email: 'mallory@example.com' }, 'users'],
    ['POST', '/v1/users/batch', { create: [{ name: 'Mallory', email: 'mallory@example.com' }] }, 'users'],
    ['POST', '/v1/items', { sku: 'ACT-1', name: 'Acted', price: '1.00' }, 'items'],
    ['POST', '/v1/items/batch', { create: [{ sku: 'ACT-1', name: 'Acted', price: '1.00' }] }, 'items'],
  ] as const)(
    '%s %s: 403 acting-forbidden and nothing stored when the request acts for a user',
    async (method, url, body, resource) => {
      const before = await counts();
      const refused = await test.call({ method, url, body, headers: bearer(hubToken) });
      expect(refused.status, refused.text).toBe(403);
      expect(refused.json.type).toBe('/problems/acting-forbidden');
      expect(refused.json.detail).toBe(
        `A request acting for user ${hubCustomer.id} may not create ${resource}: acting serves one person. Create ${resource} with the caller's own credentials.`,
      );
      expect(await counts()).toEqual(before);
    },
  );

  it('POST /v1/users: 403 acting-forbidden for an XML body too, and for an external token whose claim names a user', async () => {
    const before = await counts();
    const xml = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: { ...bearer(hubToken), 'content-type': 'application/xml', accept: 'application/xml' },
      body: '<user><name>Mallory</name><email>mallory@example.com</email></user>',
    });
    expect(xml.status).toBe(403);
    expect(xml.text).toContain('<type>/problems/acting-forbidden</type>');
    const external = await issuer.sign({ sub: 'x@idp', rowi_user: String(ada.id), scope: 'users:create' });
    const refused = await test.call({
      method: 'POST',
      url: '/v1/users',
      headers: bearer(external),
      body: { name: 'Mallory', email: 'mallory@example.com' },
    });
    expect(refused.json.type).toBe('/problems/acting-forbidden');
    expect(await counts()).toEqual(before);
  });

  it('POST /v1/orders: 201 for its own user, as before', async () => {
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: bearer(hubToken),
      body: orderFor(hubCustomer.id, 'hilda-1'),
    });
    expect(placed.status, placed.text).toBe(201);
  });
});

describe("an external issuer's token whose ROWI_JWT_USER_CLAIM names a user", () => {
  it("GET /v1/users/me, GET /v1/orders: the user and the user's orders only, whatever its scopes", async () => {
    const token = await issuer.sign({ sub: 'ada@idp', rowi_user: String(ada.id), scope: 'users:read orders:read' });
    const me = await test.call({ url: '/v1/users/me', headers: bearer(token) });
    expect(me.status).toBe(200);
    expect(me.json.id).toBe(ada.id);
    const orders = (await test.call({ url: '/v1/orders?limit=500', headers: bearer(token) })).json.data as Row[];
    expect(orders.length).toBeGreaterThan(0);
    expect(orders.every((order) => order.user_id === ada.id)).toBe(true);
    expect((await test.call({ url: `/v1/users/${bob.id}`, headers: bearer(token) })).status).toBe(404);
    // Without the claim the token acts for nobody and sees by its scopes.
    const plain = await issuer.sign({ sub: 'service@idp', scope: 'users:read' });
    expect((await test.call({ url: `/v1/users/${bob.id}`, headers: bearer(plain) })).status).toBe(200);
  });

  it('GET /v1/users/me: 401 for a token whose claim is no user id', async () => {
    for (const value of ['ada', 0, -3, 1.5, true]) {
      const token = await issuer.sign({ sub: 'x', rowi_user: value, scope: 'users:read' });
      const reply = await test.call({ url: '/v1/users/me', headers: bearer(token) });
      expect(reply.status).toBe(401);
      expect(reply.json.detail).toBe("The token's rowi_user claim is not a user id.");
    }
  });
});

describe('events by record', () => {
  it("webhooks: an own-only owner's endpoint receives the events of its own records only; dropping a caller from all to own stops another's at once", async () => {
    const hooks = await new Receiver().start();
    receivers.push(hooks);
    const watcher = await caller('watcher', {
      role: 'editor',
      extra_scopes: ['webhook-endpoints:create', 'webhook-endpoints:read'],
    });
    await createEndpoint(test, hooks, ['user.created', 'order.created'], watcher.key);
    await deliverMarker(test, hooks, 'Before narrowing');
    const narrowed = await test.call({
      method: 'PATCH',
      url: `/v1/callers/${watcher.id}`,
      body: { record_access: { users: 'own', orders: 'own' } },
    });
    expect(narrowed.status).toBe(200);
    // Another's records, then one of its own, then (to know everything before has been fanned out) its own marker.
    await make(test.adminKey, '/v1/users', { name: 'Not its own', email: 'nio@example.com' });
    await make(market.key, '/v1/orders', orderFor(bob.id, 'market-after'));
    const mine = await make(watcher.key, '/v1/users', { name: 'Its own', email: 'own@example.com' });
    await make(watcher.key, '/v1/orders', orderFor(mine.id, 'watcher-order'));
    await hooks.waitFor(1, 10_000, (received) => received.event.data.name === 'watcher-order');
    const after = hooks.received.slice(
      hooks.received.findIndex((received) => received.event.data.name === 'Before narrowing') + 1,
    );
    expect(after.map((received) => [received.event.type, received.event.data.created_by])).toEqual([
      ['user.created', watcher.id],
      ['order.created', watcher.id],
    ]);
  });

  it("GET /v1/events/stream: a token acting for a user streams that user's order events only; an own-only caller its own", async () => {
    const asAda = await SseClient.open(`${origin}/v1/events/stream`, bearer(adaToken));
    const asMarket = await SseClient.open(`${origin}/v1/events/stream`, { 'x-api-key': market.key });
    expect([asAda.response.statusCode, asMarket.response.statusCode]).toEqual([200, 200]);
    await make(market.key, '/v1/orders', orderFor(bob.id, 'streamed-bob'));
    await make(shop.key, '/v1/orders', orderFor(ada.id, 'streamed-ada'));
    await asAda.waitUntil((event) => event.data.data.name === 'streamed-ada');
    await asMarket.waitUntil((event) => event.data.data.name === 'streamed-bob');
    // Both orders moved stock and wrote stock events: neither stream gets them (they name orders).
    await make(market.key, '/v1/orders', orderFor(bob.id, 'last-bob'));
    await asMarket.waitUntil((event) => event.data.data.name === 'last-bob');
    await make(shop.key, '/v1/orders', orderFor(ada.id, 'last-ada'));
    await asAda.waitUntil((event) => event.data.data.name === 'last-ada');
    asAda.close();
    asMarket.close();
    expect(asAda.events.map((event) => [event.event, event.data.data.user_id])).toEqual([
      ['order.created', ada.id],
      ['order.created', ada.id],
    ]);
    expect(asMarket.events.map((event) => [event.event, event.data.data.created_by])).toEqual([
      ['order.created', market.id],
      ['order.created', market.id],
    ]);
  });
});
