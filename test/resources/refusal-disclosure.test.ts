import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

/**
 * A refusal tells a caller nothing it may not read (docs/security.md): a body that refers to a
 * record of a collection the caller may not read is refused the same way whether the record exists
 * or not, and a shortage of stock is not counted for a caller that may not read stock. Callers are
 * narrowed as operators narrow them: POST /v1/callers with removed_scopes, and a key of their own.
 */
let test: TestApp;
let userId: number;
let itemId: number;
let otherItemId: number;

/** A caller of the role, with these scopes removed (or added), and its API key. */
async function narrowedCaller(
  name: string,
  grants: { role?: string; removed_scopes?: string[]; extra_scopes?: string[] },
): Promise<string> {
  const caller = await test.call({
    method: 'POST',
    url: '/v1/callers',
    body: {
      name,
      role: grants.role ?? 'editor',
      removed_scopes: grants.removed_scopes ?? [],
      extra_scopes: grants.extra_scopes ?? [],
    },
  });
  expect(caller.status, caller.text).toBe(201);
  const key = await test.call({
    method: 'POST',
    url: `/v1/callers/${caller.json.id}/keys`,
    body: { description: name },
  });
  return key.json.key as string;
}

/** A problem as the caller reads it, without what differs between any two requests. */
function comparable(reply: Reply) {
  const { request_id: _requestId, ...problem } = reply.json as Record<string, unknown>;
  return { status: reply.status, challenge: reply.headers['www-authenticate'], problem };
}

const MISSING = 999_999;
const orderBody = (user: number, item: number, quantity = 1) => ({
  name: 'disclosure',
  user_id: user,
  lines: [{ item_id: item, quantity }],
});

beforeAll(async () => {
  test = await startApp();
  userId = (await createUser(test)).user.id;
  itemId = (await createItem(test)).item.id;
  otherItemId = (await createItem(test)).item.id;
  await setStock(test, itemId, 37);
  await setStock(test, otherItemId, 5);
});
afterAll(() => test.close());

describe('references to records the caller may not read', () => {
  it('POST /v1/orders: the same 403 for an existing and a missing user when the caller lacks users:read', async () => {
    const key = await narrowedCaller('no-users', { removed_scopes: ['users:read'] });
    const existing = await test.call({ method: 'POST', url: '/v1/orders', key, body: orderBody(userId, itemId) });
    const missing = await test.call({ method: 'POST', url: '/v1/orders', key, body: orderBody(MISSING, itemId) });
    const problem = expectProblem(existing, 403, 'insufficient-scope');
    expect(problem).toMatchObject({
      required_scopes: ['users:read'],
      errors: [{ in: 'body', pointer: '#/user_id', detail: 'refers to users, which needs users:read' }],
    });
    expect(problem.detail).not.toContain(String(userId));
    expect(comparable(missing)).toEqual(comparable(existing));
    expect((await test.call({ url: '/v1/orders?limit=500' })).json.data).toEqual([]);
  });

  it('POST /v1/orders: the same 403 for an existing and a missing item when the caller lacks items:read', async () => {
    const key = await narrowedCaller('no-items', { removed_scopes: ['items:read'] });
    const existing = await test.call({ method: 'POST', url: '/v1/orders', key, body: orderBody(userId, itemId) });
    const missing = await test.call({ method: 'POST', url: '/v1/orders', key, body: orderBody(userId, MISSING) });
    expect(expectProblem(existing, 403, 'insufficient-scope')).toMatchObject({
      required_scopes: ['items:read'],
      errors: [{ pointer: '#/lines' }],
    });
    expect(comparable(missing)).toEqual(comparable(existing));
  });

  it('POST /v1/orders: 422 naming the missing user to a caller that may read users', async () => {
    const problem = expectProblem(
      await test.call({ method: 'POST', url: '/v1/orders', body: orderBody(MISSING, itemId) }),
      422,
      'unknown-reference',
    );
    expect(problem.detail).toBe(`There is no user ${MISSING}.`);
  });
});

describe('shortages', () => {
  it('POST /v1/orders: 409 listing the short line without the quantity available when the caller lacks stock:read', async () => {
    const key = await narrowedCaller('no-stock', { removed_scopes: ['stock:read'] });
    const problem = expectProblem(
      await test.call({ method: 'POST', url: '/v1/orders', key, body: orderBody(userId, itemId, 40) }),
      409,
      'insufficient-stock',
    );
    expect(problem.short_lines).toEqual([{ item_id: itemId, requested: 40 }]);
    expect(problem.detail).not.toMatch(/37/);
    expect(problem.detail).toMatch(new RegExp(`item ${itemId}: 40 requested`));
  });

  it('POST /v1/orders: 409 with the quantity available when the caller may read stock', async () => {
    const problem = expectProblem(
      await test.call({ method: 'POST', url: '/v1/orders', body: orderBody(userId, itemId, 40) }),
      409,
      'insufficient-stock',
    );
    expect(problem.short_lines).toEqual([{ item_id: itemId, requested: 40, available: 37 }]);
    expect(problem.detail).toMatch(/40 requested, 37 available/);
  });
});

describe('changes of an order by a narrowed caller', () => {
  let orderId: number;
  let narrowKey: string;

  beforeAll(async () => {
    orderId = (await test.call({ method: 'POST', url: '/v1/orders', body: orderBody(userId, itemId, 2) })).json.id;
    narrowKey = await narrowedCaller('order-editor', { removed_scopes: ['users:read', 'items:read', 'stock:read'] });
  });

  it('PUT /v1/orders/{id}: the same 403 for an existing and a missing new user when the caller lacks users:read', async () => {
    const otherUser = (await createUser(test)).user.id;
    const existing = await test.call({
      method: 'PUT',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: orderBody(otherUser, itemId, 2),
    });
    const missing = await test.call({
      method: 'PUT',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: orderBody(MISSING, itemId, 2),
    });
    expect(expectProblem(existing, 403, 'insufficient-scope')).toMatchObject({ required_scopes: ['users:read'] });
    expect(comparable(missing)).toEqual(comparable(existing));
    expect((await test.call({ url: `/v1/orders/${orderId}` })).json.user_id).toBe(userId);
  });

  it('PATCH /v1/orders/{id}: the same 403 for an existing and a missing new item when the caller lacks items:read', async () => {
    const lines = (item: number) => [
      { item_id: itemId, quantity: 2 },
      { item_id: item, quantity: 1 },
    ];
    const existing = await test.call({
      method: 'PATCH',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: { lines: lines(otherItemId) },
    });
    const missing = await test.call({
      method: 'PATCH',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: { lines: lines(MISSING) },
    });
    expect(expectProblem(existing, 403, 'insufficient-scope')).toMatchObject({
      required_scopes: ['items:read'],
      errors: [{ pointer: '#/lines' }],
    });
    expect(comparable(missing)).toEqual(comparable(existing));
  });

  it('PATCH /v1/orders/{id}: 409 without the quantity available when the caller raises a line past the stock and lacks stock:read', async () => {
    const problem = expectProblem(
      await test.call({
        method: 'PATCH',
        url: `/v1/orders/${orderId}`,
        key: narrowKey,
        body: { lines: [{ item_id: itemId, quantity: 100 }] },
      }),
      409,
      'insufficient-stock',
    );
    expect(problem.short_lines).toEqual([{ item_id: itemId, requested: 100 }]);
    expect(problem.detail).not.toMatch(/available,|\d+ available/);
  });

  it('PUT and PATCH /v1/orders/{id}: 200 when the caller names only the user and items already on the order, and for a status transition', async () => {
    const put = await test.call({
      method: 'PUT',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: { ...orderBody(userId, itemId, 3), name: 'renamed' },
    });
    expect(put.status, put.text).toBe(200);
    const patch = await test.call({
      method: 'PATCH',
      url: `/v1/orders/${orderId}`,
      key: narrowKey,
      body: { status: 'cancelled' },
    });
    expect(patch.status, patch.text).toBe(200);
    expect(patch.json.status).toBe('cancelled');
  });
});

describe('stock', () => {
  it('PUT and PATCH /v1/items/{id}/stock: 403 without the stock in the answer, the same for a missing item, when the caller lacks stock:read', async () => {
    const key = await narrowedCaller('stock-writer', { removed_scopes: ['stock:read'] });
    for (const method of ['PUT', 'PATCH'] as const) {
      const existing = await test.call({
        method,
        url: `/v1/items/${itemId}/stock`,
        key,
        body: { quantity: 37, reserved: 0 },
      });
      const missing = await test.call({
        method,
        url: `/v1/items/${MISSING}/stock`,
        key,
        body: { quantity: 37, reserved: 0 },
      });
      expect(expectProblem(existing, 403, 'insufficient-scope').required_scopes).toEqual(['stock:read']);
      expect(comparable({ ...missing, json: { ...missing.json, instance: null } })).toEqual(
        comparable({ ...existing, json: { ...existing.json, instance: null } }),
      );
    }
    expect((await test.call({ url: `/v1/items/${itemId}/stock` })).json.quantity).toBe(37);
  });
});

describe('deletes blocked by orders', () => {
  it('DELETE /v1/users/{id}: 409 that names no order and counts none when the caller lacks orders:read', async () => {
    const owner = (await createUser(test)).user.id;
    for (let index = 0; index < 3; index++)
      await test.call({ method: 'POST', url: '/v1/orders', body: orderBody(owner, otherItemId) });
    const key = await narrowedCaller('user-deleter', {
      extra_scopes: ['users:delete'],
      removed_scopes: ['orders:read'],
    });
    const problem = expectProblem(
      await test.call({ method: 'DELETE', url: `/v1/users/${owner}`, key }),
      409,
      'user-has-open-orders',
    );
    expect(Object.keys(problem).sort()).toEqual(['detail', 'instance', 'request_id', 'status', 'title', 'type']);
    expect(problem.detail).toBe(`User ${owner} has placed orders; fulfil, cancel or delete them first.`);
  });

  it('DELETE /v1/items/{id}: 409 that names no order when the caller lacks orders:read', async () => {
    const key = await narrowedCaller('item-deleter', {
      extra_scopes: ['items:delete'],
      removed_scopes: ['orders:read'],
    });
    const problem = expectProblem(
      await test.call({ method: 'DELETE', url: `/v1/items/${otherItemId}`, key }),
      409,
      'item-in-use',
    );
    expect(Object.keys(problem).sort()).toEqual(['detail', 'instance', 'request_id', 'status', 'title', 'type']);
    expect(problem.detail).toBe(`Item ${otherItemId} is on orders; an item that has been ordered cannot be deleted.`);
  });
});
