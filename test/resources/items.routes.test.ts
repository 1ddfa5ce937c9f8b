import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser, expectProblem, startApp, type TestApp } from '../helpers/app.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

let skuSequence = 0;
const nextSku = () => `IT-${++skuSequence}`;

async function createItem(overrides: Record<string, unknown> = {}) {
  const reply = await test.call({ method: 'POST', url: '/v1/items', body: { name: 'Widget', sku: nextSku(), price: '2.50', ...overrides } });
  if (reply.status !== 201) throw new Error(`could not create item: ${reply.status} ${reply.text}`);
  return reply.json as { id: number; name: string; sku: string; price: string };
}

/** Items, stock and ledger rows: what "nothing stored changed" is checked against. */
async function storedState() {
  const db = test.storage.db;
  return {
    items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
    stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
    movements: await db.selectFrom('stock_movements').selectAll().orderBy('id').execute(),
  };
}

describe('items', () => {
  it('POST /v1/items: 201 with Location and ETag, the price stored in cents and shown with two decimals, and its stock at 0', async () => {
    const reply = await test.call({ method: 'POST', url: '/v1/items', body: { name: 'Widget', sku: 'W-100', price: '2.5' } });

    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/items/${reply.json.id}`);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json).toEqual({ id: expect.any(Number), name: 'Widget', sku: 'W-100', price: '2.50', created_at: expect.any(String), updated_at: expect.any(String) });
    const stored = await test.storage.db.selectFrom('items').select(['price']).where('id', '=', reply.json.id).executeTakeFirstOrThrow();
    expect(stored.price).toBe(250);
    const stock = await test.call({ url: `/v1/items/${reply.json.id}/stock` });
    expect(stock.status).toBe(200);
    expect(stock.json).toEqual({ item_id: reply.json.id, quantity: 0, reserved: 0, updated_at: expect.any(String) });
  });

  it.each([
    ['10', '10.00'],
    ['0', '0.00'],
    ['0.05', '0.05'],
    ['9999999999.99', '9999999999.99'],
  ])('POST /v1/items: price %s is shown as %s', async (price, shown) => {
    expect((await createItem({ price })).price).toBe(shown);
  });

  it('POST /v1/items: 201 from an XML body, answered in XML', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/items',
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body: '<item><name>Gadget</name><sku>G-XML</sku><price>10</price></item>',
    });
    expect(reply.status).toBe(201);
    expect(reply.text).toContain('<sku>G-XML</sku><price>10.00</price>');
  });

  const badPrices: [string, string][] = [
    ['"1.005"', '"1.005"'],
    ['"-1"', '"-1"'],
    ['"abc"', '"abc"'],
    ['1e400', '1e400'],
    ['the number 12.5', '12.5'],
  ];
  it.each(badPrices)('POST /v1/items: 422 validation-failed at #/price when the price is %s, and nothing is stored', async (_case, raw) => {
    const before = await storedState();

    const reply = await test.call({ method: 'POST', url: '/v1/items', headers: { 'content-type': 'application/json' }, body: `{"name":"Bad","sku":"${nextSku()}","price":${raw}}` });

    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/price']);
    expect(await storedState()).toEqual(before);
  });

  it.each(badPrices)('PATCH /v1/items/{id}: 422 validation-failed at #/price when the price is %s, and nothing changes', async (_case, raw) => {
    const item = await createItem();
    const before = await storedState();

    const reply = await test.call({ method: 'PATCH', url: `/v1/items/${item.id}`, headers: { 'content-type': 'application/merge-patch+json' }, body: `{"price":${raw}}` });

    expectProblem(reply, 422, 'validation-failed');
    expect(await storedState()).toEqual(before);
  });

  it('POST /v1/items: 409 sku-taken when another item has the SKU, and nothing is stored', async () => {
    const existing = await createItem();
    const before = await storedState();

    const reply = await test.call({ method: 'POST', url: '/v1/items', body: { name: 'Copy', sku: existing.sku, price: '1.00' } });

    expectProblem(reply, 409, 'sku-taken');
    expect(await storedState()).toEqual(before);
  });

  it('PATCH /v1/items/{id}: 409 sku-taken when moving to another item\'s SKU; 200 with a new ETag for a free one', async () => {
    const first = await createItem();
    const second = await createItem();

    expectProblem(await test.call({ method: 'PATCH', url: `/v1/items/${second.id}`, headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ sku: first.sku }) }), 409, 'sku-taken');
    const renamed = await test.call({ method: 'PATCH', url: `/v1/items/${second.id}`, headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ sku: 'FREE-1', price: '3' }) });

    expect(renamed.status).toBe(200);
    expect(renamed.headers.etag).toBe('"v2"');
    expect(renamed.json).toMatchObject({ sku: 'FREE-1', price: '3.00' });
  });

  it('PUT /v1/items/{id}: replaces the writable fields; 412 with a stale If-Match', async () => {
    const item = await createItem();
    const replaced = await test.call({ method: 'PUT', url: `/v1/items/${item.id}`, headers: { 'if-match': '"v1"' }, body: { name: 'Widget Pro', sku: item.sku, price: '4.75' } });
    expect(replaced.status).toBe(200);
    expect(replaced.json).toMatchObject({ name: 'Widget Pro', price: '4.75' });

    const before = await storedState();
    expectProblem(await test.call({ method: 'PUT', url: `/v1/items/${item.id}`, headers: { 'if-match': '"v1"' }, body: { name: 'Stale', sku: item.sku, price: '1' } }), 412, 'precondition-failed');
    expect(await storedState()).toEqual(before);
  });

  it('GET /v1/items: filters by sku and sorts by price', async () => {
    await createItem({ sku: 'SORT-A', price: '5' });
    await createItem({ sku: 'SORT-B', price: '1' });

    expect((await test.call({ url: '/v1/items?sku=SORT-A' })).json.data.map((item: { sku: string }) => item.sku)).toEqual(['SORT-A']);
    const sorted = (await test.call({ url: '/v1/items?sort=price&limit=500' })).json.data.map((item: { price: string }) => Number(item.price));
    expect(sorted).toEqual([...sorted].sort((a, b) => a - b));
  });

  it('DELETE /v1/items/{id}: 204 and the stock and ledger go with it when no order has it', async () => {
    const item = await createItem();
    await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 5 } });

    expect((await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` })).status).toBe(204);

    expectProblem(await test.call({ url: `/v1/items/${item.id}/stock` }), 404, 'not-found');
    const leftovers = await test.storage.db.selectFrom('stock_movements').select('id').where('item_id', '=', item.id).execute();
    expect(leftovers).toEqual([]);
  });

  it('DELETE /v1/items/{id}: 409 item-in-use when an order has it, and nothing changes', async () => {
    const item = await createItem();
    const { user } = await createUser(test);
    await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 5 } });
    expect((await test.call({ method: 'POST', url: '/v1/orders', body: { name: 'SO', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] } })).status).toBe(201);
    const before = await storedState();

    expectProblem(await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` }), 409, 'item-in-use');
    expect(await storedState()).toEqual(before);
  });

  it.each(['/v1/items/999999', '/v1/items/999999/stock', '/v1/items/999999/stock/movements'])('GET %s: 404 not-found for an unknown item', async (url) => {
    expectProblem(await test.call({ url }), 404, 'not-found');
  });
});

describe('stock', () => {
  it('PUT /v1/items/{id}/stock: sets the quantity with a fresh If-Match, records a set movement, and a PUT of the same quantity changes nothing', async () => {
    const item = await createItem();

    const set = await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, headers: { 'if-match': '"v1"' }, body: { quantity: 7 } });
    const same = await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 7 } });

    expect(set.status).toBe(200);
    expect(set.headers.etag).toBe('"v2"');
    expect(set.json).toMatchObject({ item_id: item.id, quantity: 7, reserved: 0 });
    expect(same.headers.etag).toBe('"v2"');
    const movements = await test.call({ url: `/v1/items/${item.id}/stock/movements` });
    expect(movements.json.data).toEqual([
      { id: expect.any(Number), item_id: item.id, kind: 'set', quantity_change: 7, reserved_change: 0, quantity_after: 7, reserved_after: 0, order_id: null, created_at: expect.any(String) },
    ]);
    expect((await test.call({ url: `/v1/items/${item.id}/stock`, headers: { 'if-none-match': '"v2"' } })).status).toBe(304);
  });

  it.each([
    ['-1', -1],
    ['1.5', 1.5],
    ['"2"', '2'],
    ['10^12 + 1', 1_000_000_000_001],
  ])('PUT /v1/items/{id}/stock: 422 validation-failed at #/quantity for %s, and stock and ledger are unchanged', async (_case, quantity) => {
    const item = await createItem();
    await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 3 } });
    const before = await storedState();

    const reply = await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity } });

    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/quantity']);
    expect(await storedState()).toEqual(before);
  });

  it('PATCH /v1/items/{id}/stock: 412 with a stale If-Match, and stock and ledger are unchanged', async () => {
    const item = await createItem();
    await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 3 } });
    const before = await storedState();

    const reply = await test.call({ method: 'PATCH', url: `/v1/items/${item.id}/stock`, headers: { 'content-type': 'application/merge-patch+json', 'if-match': '"v1"' }, body: JSON.stringify({ quantity: 9 }) });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedState()).toEqual(before);
  });

  it('PUT /v1/items/{id}/stock: 422 read-only-field when the body changes reserved; an equal echo is accepted', async () => {
    const item = await createItem();
    const before = await storedState();

    expectProblem(await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 3, reserved: 5 } }), 422, 'read-only-field');
    expect(await storedState()).toEqual(before);
    expect((await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 3, reserved: 0, item_id: item.id } })).status).toBe(200);
  });

  it('GET /v1/items/{id}/stock/movements: newest first, paged with a cursor, and the ledger sums to the quantity', async () => {
    const item = await createItem();
    for (const quantity of [4, 9, 2]) await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity } });

    const first = await test.call({ url: `/v1/items/${item.id}/stock/movements?limit=2` });
    const second = await test.call({ url: `/v1/items/${item.id}/stock/movements?limit=2&cursor=${first.json.next_cursor}` });

    const all = [...first.json.data, ...second.json.data];
    expect(all.map((move) => move.quantity_after)).toEqual([2, 9, 4]);
    expect(second.json.next_cursor).toBeNull();
    expect(all.reduce((sum, move) => sum + move.quantity_change, 0)).toBe(2);
  });
});
