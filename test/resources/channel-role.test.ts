import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerThroughApi, createWithKey } from '../helpers/records.js';

/**
 * The channel role (docs/access.md "Roles and their record access"): a sales channel places
 * orders for its own customers and cancels them (POST /v1/orders/{id}/cancel, orders:cancel), but
 * neither fulfils nor otherwise changes them; it reads the catalogue and the events of its own
 * records (events:read), and follows its own imports (operations:*). A caller's scopes come from its
 * role when it authenticates, so a channel created before these scopes existed holds them too.
 */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let test: TestApp;
const shop = { id: 0, key: '' };
const market = { id: 0, key: '' };
let item: Row;
let ada: Row;
let adaToken = '';

const caller = (name: string) => createCallerThroughApi(test, name, { role: 'channel', extra_scopes: ['users:act'] });

const make = (key: string, url: string, body: unknown) => createWithKey(test, key, url, body);

const order = (key: string, userId: number, name: string) =>
  make(key, '/v1/orders', { name, user_id: userId, lines: [{ item_id: item.id, quantity: 2 }] });
const stockOf = async () => (await test.call({ url: `/v1/items/${item.id}/stock` })).json;

beforeAll(async () => {
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  Object.assign(shop, await caller('web-shop'));
  Object.assign(market, await caller('marketplace'));
  item = await make(test.adminKey, '/v1/items', { name: 'Mug', sku: 'MUG-1', price: '4.00' });
  await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 100 } });
  ada = await make(shop.key, '/v1/users', { name: 'Ada', email: 'ada@example.com' });
  adaToken = await issueToken(test, { name: 'web-shop' }, shop.key, { user_id: String(ada.id) });
});
afterAll(() => test.close());

describe('the channel role', () => {
  it('GET /v1/callers/{id}: a channel holds orders:cancel, events:read and operations:* through its role, with nothing granted', async () => {
    const reply = await test.call({ url: `/v1/callers/${shop.id}` });
    expect(reply.json.extra_scopes).toEqual(['users:act']);
    expect([...reply.json.scopes].sort()).toEqual(
      [
        'events:read',
        'items:read',
        'operations:read',
        'operations:update',
        'orders:cancel',
        'orders:create',
        'orders:read',
        'stock:read',
        'users:act',
        'users:create',
        'users:read',
      ].sort(),
    );
  });

  it("GET /v1/events: 200 to a channel, with the events of its own records only (no stock events, no other channel's)", async () => {
    const bob = await make(market.key, '/v1/users', { name: 'Bob', email: 'bob@example.com' });
    await order(market.key, bob.id, 'market-1');
    await order(shop.key, ada.id, 'shop-1');
    const reply = await test.call({ url: '/v1/events?limit=500', key: shop.key });
    expect(reply.status, reply.text).toBe(200);
    const events = reply.json.data as Row[];
    // Items as every caller that sees all items; users and orders its own only; stock events to none that sees only some orders.
    expect(
      events.filter((event) => !event.type.startsWith('item.')).map((event) => [event.type, event.data.name]),
    ).toEqual([
      ['order.created', 'shop-1'],
      ['user.created', 'Ada'],
    ]);
  });

  it('POST /v1/orders/{id}/cancel: 200 cancelled, its stock returned, with order.status_changed, for its own order; the same again changes nothing', async () => {
    const placed = await order(shop.key, ada.id, 'to-cancel');
    const before = await stockOf();
    const cancelled = await test.call({ method: 'POST', url: `/v1/orders/${placed.id}/cancel`, key: shop.key });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.json).toMatchObject({ id: placed.id, status: 'cancelled', created_by: shop.id });
    expect(cancelled.headers.etag).toBe((await test.call({ url: `/v1/orders/${placed.id}` })).headers.etag);
    const after = await stockOf();
    expect([after.quantity, after.reserved]).toEqual([before.quantity + 2, before.reserved - 2]);
    const again = await test.call({ method: 'POST', url: `/v1/orders/${placed.id}/cancel`, key: shop.key });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(cancelled.json);
    const events = (await test.call({ url: '/v1/events?limit=500', key: shop.key })).json.data as Row[];
    expect(events.filter((event) => event.path === `/v1/orders/${placed.id}`).map((event) => event.type)).toEqual([
      'order.status_changed',
      'order.created',
    ]);
  });

  it("POST /v1/orders/{id}/cancel: 404 as for none for another channel's order; 409 invalid-transition for a fulfilled one; 412 for a stale If-Match", async () => {
    const bob = await make(market.key, '/v1/users', { name: 'Bobby', email: 'bobby@example.com' });
    const theirs = await order(market.key, bob.id, 'not-yours');
    const hidden = await test.call({ method: 'POST', url: `/v1/orders/${theirs.id}/cancel`, key: shop.key });
    const never = await test.call({ method: 'POST', url: '/v1/orders/987654321/cancel', key: shop.key });
    expectProblem(hidden, 404, 'not-found');
    expect(hidden.json.detail).toBe(never.json.detail.replace('987654321', String(theirs.id)));
    expect((await test.call({ url: `/v1/orders/${theirs.id}` })).json.status).toBe('placed');

    const fulfilled = await order(shop.key, ada.id, 'fulfilled');
    await test.call({ method: 'PATCH', url: `/v1/orders/${fulfilled.id}`, body: { status: 'fulfilled' } });
    expectProblem(
      await test.call({ method: 'POST', url: `/v1/orders/${fulfilled.id}/cancel`, key: shop.key }),
      409,
      'invalid-transition',
    );
    const placed = await order(shop.key, ada.id, 'stale');
    const stale = await test.call({
      method: 'POST',
      url: `/v1/orders/${placed.id}/cancel`,
      key: shop.key,
      headers: { 'if-match': '"v999"' },
    });
    expectProblem(stale, 412, 'precondition-failed');
    expect((await test.call({ url: `/v1/orders/${placed.id}` })).json.status).toBe('placed');
  });

  it('PATCH, PUT, DELETE /v1/orders/{id}: 403 insufficient-scope for a channel, fulfilment included: it may cancel, nothing more', async () => {
    const placed = await order(shop.key, ada.id, 'unchanged');
    for (const [method, body] of [
      ['PATCH', { status: 'fulfilled' }],
      ['PATCH', { status: 'cancelled' }],
      ['PUT', { name: 'x', user_id: ada.id, lines: [{ item_id: item.id, quantity: 1 }] }],
      ['DELETE', undefined],
    ] as const) {
      const refused = await test.call({ method, url: `/v1/orders/${placed.id}`, key: shop.key, body });
      expectProblem(refused, 403, 'insufficient-scope');
    }
    expect((await test.call({ url: `/v1/orders/${placed.id}` })).json).toEqual(placed);
  });

  it("POST /v1/orders/{id}/cancel: a channel's token acting for Ada cancels Ada's order, and another customer's is 404", async () => {
    const carl = await make(shop.key, '/v1/users', { name: 'Carl', email: 'carl@example.com' });
    const forAda = await order(shop.key, ada.id, 'ada-cancel');
    const forCarl = await order(shop.key, carl.id, 'carl-cancel');
    const headers = { authorization: `Bearer ${adaToken}` };
    const cancelled = await test.call({ method: 'POST', url: `/v1/orders/${forAda.id}/cancel`, headers });
    expect(cancelled.json.status).toBe('cancelled');
    expectProblem(
      await test.call({ method: 'POST', url: `/v1/orders/${forCarl.id}/cancel`, headers }),
      404,
      'not-found',
    );
  });

  it('POST /v1/orders/{id}/cancel: 403 insufficient-scope for a reader, as for every order', async () => {
    const reader = await test.call({ method: 'POST', url: '/v1/callers', body: { name: 'reader', role: 'reader' } });
    const key = (await test.call({ method: 'POST', url: `/v1/callers/${reader.json.id}/keys`, body: {} })).json.key;
    const placed = await order(shop.key, ada.id, 'read-only');
    const refused = await test.call({ method: 'POST', url: `/v1/orders/${placed.id}/cancel`, key });
    expectProblem(refused, 403, 'insufficient-scope');
    expect(refused.json.required_scopes).toEqual(['orders:cancel']);
  });
});
