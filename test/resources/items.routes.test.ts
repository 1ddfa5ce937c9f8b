import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Item } from '../../src/resources/items/items.schema.js';
import type { Movement } from '../../src/resources/items/stock.schema.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, createItem, createUser, setStock } from '../helpers/records.js';
import { storedInventory } from '../helpers/stored.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Places an order of `quantity` units of the item (the stock must cover it) and returns the order id. */
async function placeOrder(itemId: number, quantity: number) {
  const { user } = await createUser(test);
  const reply = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: `Order of ${itemId}`, user_id: user.id, lines: [{ item_id: itemId, quantity }] },
  });
  if (reply.status !== 201) throw new Error(`could not place order: ${reply.status} ${reply.text}`);
  return reply.json.id as number;
}

function storedItem(id: number) {
  return test.storage.db.selectFrom('items').selectAll().where('id', '=', id).executeTakeFirst();
}

function storedStock(itemId: number) {
  return test.storage.db.selectFrom('stock').selectAll().where('item_id', '=', itemId).executeTakeFirst();
}

function storedMovements(itemId: number) {
  return test.storage.db
    .selectFrom('stock_movements')
    .selectAll()
    .where('item_id', '=', itemId)
    .orderBy('id')
    .execute();
}

/**
 * Prices the API must refuse, as raw JSON text (so numbers such as 1e400 reach the parser as
 * written), with the reason given at #/price.
 */
const BAD_PRICES: [string, string, string][] = [
  [
    '"1.005" (three decimals)',
    '"1.005"',
    'must be a decimal string with at most 2 decimal places, 0 or more and below 10000000000 (for example "12.50")',
  ],
  [
    '"-1" (negative)',
    '"-1"',
    'must be a decimal string with at most 2 decimal places, 0 or more and below 10000000000 (for example "12.50")',
  ],
  [
    '"abc" (not a number)',
    '"abc"',
    'must be a decimal string with at most 2 decimal places, 0 or more and below 10000000000 (for example "12.50")',
  ],
  [
    '"10000000000" (too large)',
    '"10000000000"',
    'must be a decimal string with at most 2 decimal places, 0 or more and below 10000000000 (for example "12.50")',
  ],
  ['the JSON number 1e400 (beyond a double)', '1e400', 'must be a string'],
  ['the JSON number 12.5 (not a string)', '12.5', 'must be a string'],
];

describe('POST /v1/items', () => {
  it('POST /v1/items: 201 with Location, ETag and the item when the body is valid, the price stored in minor units and the stock created at 0', async () => {
    const body = buildItem({ name: 'Widget', price: '2.5' });

    const reply = await test.call({ method: 'POST', url: '/v1/items', body });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual({
      id: expect.any(Number),
      name: 'Widget',
      sku: body.sku,
      price: '2.50',
      created_by: 1,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(reply.headers.location).toBe(`/v1/items/${reply.json.id}`);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json.created_at).toMatch(TIMESTAMP);
    expect(reply.json.updated_at).toBe(reply.json.created_at);
    expect(await storedItem(reply.json.id)).toEqual({
      id: reply.json.id,
      name: 'Widget',
      sku: body.sku,
      price: 250,
      created_by: 1,
      version: 1,
      created_at: reply.json.created_at,
      updated_at: reply.json.created_at,
    });
    expect(await storedStock(reply.json.id)).toEqual({
      item_id: reply.json.id,
      quantity: 0,
      reserved: 0,
      fulfilled: 0,
      version: 1,
      updated_at: reply.json.created_at,
    });
    expect(await storedMovements(reply.json.id)).toEqual([]);
  });

  it.each([
    ['2.5', '2.50', 250],
    ['10', '10.00', 1000],
    ['0', '0.00', 0],
    ['0.05', '0.05', 5],
    ['19.99', '19.99', 1999],
    ['9999999999.99', '9999999999.99', 999_999_999_999],
  ])(
    'POST /v1/items: 201 showing the price as %s → %s and storing %i minor units when the price has at most 2 decimals',
    async (price, shown, minor) => {
      const reply = await test.call({ method: 'POST', url: '/v1/items', body: buildItem({ price }) });

      expect(reply.status).toBe(201);
      expect(reply.json.price).toBe(shown);
      expect((await storedItem(reply.json.id))?.price).toBe(minor);
      const read = await test.call({ url: `/v1/items/${reply.json.id}` });
      expect(read.json.price).toBe(shown);
    },
  );

  it('POST /v1/items: 201 when the body is XML, answered in XML when Accept asks for it', async () => {
    const sku = buildItem().sku;

    const reply = await test.call({
      method: 'POST',
      url: '/v1/items',
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body: `<?xml version="1.0"?><item><name>Nuts &amp; Bolts &lt;M8&gt;</name><sku>${sku}</sku><price>10</price></item>`,
    });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.etag).toBe('"v1-xml"');
    expect(reply.text).toMatch(
      new RegExp(
        `^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<item><id>\\d+</id><name>Nuts &amp; Bolts &lt;M8&gt;</name><sku>${sku}</sku><price>10.00</price><created_by>1</created_by><created_at>[^<]+</created_at><updated_at>[^<]+</updated_at></item>$`,
      ),
    );
    const id = Number(/<id>(\d+)<\/id>/.exec(reply.text)![1]);
    expect(reply.headers.location).toBe(`/v1/items/${id}`);
    expect(await storedItem(id)).toMatchObject({ name: 'Nuts & Bolts <M8>', sku, price: 1000, version: 1 });
    expect(await storedStock(id)).toMatchObject({ quantity: 0, reserved: 0, fulfilled: 0, version: 1 });
    const read = await test.call({ url: `/v1/items/${id}` });
    expect(read.json).toMatchObject({ name: 'Nuts & Bolts <M8>', sku, price: '10.00' });
  });

  it.each(BAD_PRICES)(
    'POST /v1/items: 422 validation-failed at #/price when the price is %s, and nothing is stored',
    async (_case, raw, detail) => {
      const before = await storedInventory(test);

      const reply = await test.call({
        method: 'POST',
        url: '/v1/items',
        headers: { 'content-type': 'application/json' },
        body: `{"name":"x","sku":"${buildItem().sku}","price":${raw}}`,
      });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/price', detail }]);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('POST /v1/items: 422 validation-failed at #/price when an XML body has three decimals, and nothing is stored', async () => {
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'POST',
      url: '/v1/items',
      headers: { 'content-type': 'application/xml' },
      body: `<item><name>x</name><sku>${buildItem().sku}</sku><price>1.005</price></item>`,
    });

    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/price']);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('POST /v1/items: 409 sku-taken when another item has the SKU, and nothing is stored', async () => {
    const { item: existing } = await createItem(test);
    const before = await storedInventory(test);

    const reply = await test.call({ method: 'POST', url: '/v1/items', body: buildItem({ sku: existing.sku }) });

    const problem = expectProblem(reply, 409, 'sku-taken');
    expect(problem.detail).toContain(existing.sku);
    expect(problem.conflicting_field).toBe('sku');
    expect(await storedInventory(test)).toEqual(before);
  });

  it("POST /v1/items: 201 when the SKU differs from another item's only in case (SKUs are compared exactly)", async () => {
    const { item: existing } = await createItem(test, { sku: `Case-${buildItem().sku}` });

    const reply = await test.call({
      method: 'POST',
      url: '/v1/items',
      body: buildItem({ sku: existing.sku.toLowerCase() }),
    });

    expect(reply.status).toBe(201);
    expect(reply.json.sku).toBe(existing.sku.toLowerCase());
    expect(await storedItem(existing.id)).toMatchObject({ sku: existing.sku });
  });
});

describe('GET /v1/items', () => {
  it('GET /v1/items: 200 with only the matching items when filtered by sku or name', async () => {
    const name = `Filtered ${buildItem().sku}`;
    const { item: first } = await createItem(test, { name });
    const { item: second } = await createItem(test, { name });
    await createItem(test);

    const bySku = await test.call({ url: `/v1/items?sku=${encodeURIComponent(first.sku)}` });
    const byName = await test.call({ url: `/v1/items?name=${encodeURIComponent(name)}` });

    expect(bySku.status).toBe(200);
    expect(bySku.json).toEqual({ data: [first], next_cursor: null });
    expect(byName.json).toEqual({ data: [first, second], next_cursor: null });
  });

  it('GET /v1/items: pages sorted by price in minor units (ties broken by id) when following next_cursor', async () => {
    const name = `Priced ${buildItem().sku}`;
    const { item: five } = await createItem(test, { name, price: '5' });
    const { item: one } = await createItem(test, { name, price: '1' });
    const { item: fiveAgain } = await createItem(test, { name, price: '5.00' });
    const { item: half } = await createItem(test, { name, price: '0.5' });
    const { item: ten } = await createItem(test, { name, price: '10' });

    const seen: Item[] = [];
    let url: string | undefined = `/v1/items?name=${encodeURIComponent(name)}&sort=price&limit=2`;
    let pages = 0;
    while (url !== undefined) {
      const page = await test.call({ url });
      expect(page.status).toBe(200);
      seen.push(...(page.json.data as Item[]));
      pages++;
      url =
        page.json.next_cursor === null
          ? undefined
          : `/v1/items?name=${encodeURIComponent(name)}&sort=price&limit=2&cursor=${page.json.next_cursor}`;
    }

    expect(pages).toBe(3);
    expect(seen.map((item) => item.id)).toEqual([half.id, one.id, five.id, fiveAgain.id, ten.id]);
    expect(seen.map((item) => item.price)).toEqual(['0.50', '1.00', '5.00', '5.00', '10.00']);
  });

  it('GET /v1/items: 200 filtered by created_after and created_before', async () => {
    const { item } = await createItem(test);

    const after = await test.call({ url: `/v1/items?sku=${item.sku}&created_after=2000-01-01T00:00:00Z` });
    const before = await test.call({ url: `/v1/items?sku=${item.sku}&created_before=2000-01-01T00:00:00Z` });

    expect(after.json.data).toEqual([item]);
    expect(before.json).toEqual({ data: [], next_cursor: null });
  });

  it('GET /v1/items: 400 invalid-query when sort names a field items cannot be sorted by', async () => {
    const reply = await test.call({ url: '/v1/items?sort=quantity' });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/sort']);
  });
});

describe('GET /v1/items/{id}', () => {
  it('GET /v1/items/{id}: 200 with the item and a strong ETag', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({ url: `/v1/items/${item.id}` });

    expect(reply.status).toBe(200);
    expect(reply.json).toEqual(item);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.headers.vary).toBe('Accept');
  });

  it('GET /v1/items/{id}: 304 without a body when If-None-Match holds the current ETag', async () => {
    const { item, etag } = await createItem(test);

    const reply = await test.call({ url: `/v1/items/${item.id}`, headers: { 'if-none-match': etag } });

    expect(reply.status).toBe(304);
    expect(reply.text).toBe('');
    expect(reply.headers.etag).toBe(etag);
  });

  it.each([
    ['a non-numeric id', 'abc'],
    ['zero', '0'],
    ['an id that names no item', '987654'],
  ])('GET /v1/items/{id}: 404 not-found when the id is %s', async (_case, id) => {
    const reply = await test.call({ url: `/v1/items/${id}` });
    const problem = expectProblem(reply, 404, 'not-found');
    expect(problem.instance).toBe(`/v1/items/${id}`);
  });
});

describe('PUT /v1/items/{id}', () => {
  it('PUT /v1/items/{id}: 200 with the replaced item, a new ETag and the new price stored in minor units', async () => {
    const { item, etag } = await createItem(test);
    const stockBefore = await storedStock(item.id);
    const sku = buildItem().sku;

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}`,
      headers: { 'if-match': etag },
      body: { name: 'Widget Pro', sku, price: '4.7' },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
    expect(reply.json).toEqual({
      id: item.id,
      name: 'Widget Pro',
      sku,
      price: '4.70',
      created_by: 1,
      created_at: item.created_at,
      updated_at: expect.any(String),
    });
    expect(reply.json.updated_at >= item.updated_at).toBe(true);
    expect(await storedItem(item.id)).toEqual({
      id: item.id,
      name: 'Widget Pro',
      sku,
      price: 470,
      created_by: 1,
      version: 2,
      created_at: item.created_at,
      updated_at: reply.json.updated_at,
    });
    expect(await storedStock(item.id)).toEqual(stockBefore);
  });

  it('PUT /v1/items/{id}: 200 with the same ETag and updated_at when nothing changes ("2.5" equals the stored 2.50)', async () => {
    const { item, etag } = await createItem(test, { price: '2.50' });
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}`,
      headers: { 'if-match': etag },
      body: { name: item.name, sku: item.sku, price: '2.5' },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(etag);
    expect(reply.json).toEqual(item);
    expect(await storedInventory(test)).toEqual(before);
  });

  it.each(BAD_PRICES)(
    'PUT /v1/items/{id}: 422 validation-failed at #/price when the price is %s, and nothing changes',
    async (_case, raw, detail) => {
      const { item } = await createItem(test);
      const before = await storedInventory(test);

      const reply = await test.call({
        method: 'PUT',
        url: `/v1/items/${item.id}`,
        headers: { 'content-type': 'application/json' },
        body: `{"name":"x","sku":"${item.sku}","price":${raw}}`,
      });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/price', detail }]);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('PUT /v1/items/{id}: 409 sku-taken when the new SKU belongs to another item, and nothing changes', async () => {
    const { item: first } = await createItem(test);
    const { item: second } = await createItem(test);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${second.id}`,
      body: { name: second.name, sku: first.sku, price: second.price },
    });

    expectProblem(reply, 409, 'sku-taken');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}: 412 precondition-failed when If-Match is stale, and nothing changes', async () => {
    const { item, etag } = await createItem(test);
    await test.call({ method: 'PATCH', url: `/v1/items/${item.id}`, body: { name: 'Changed By Someone Else' } });
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}`,
      headers: { 'if-match': etag },
      body: { name: 'Mine', sku: item.sku, price: '1' },
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}: 422 read-only-field when id or created_at differ from the stored values, and nothing changes', async () => {
    const { item } = await createItem(test);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}`,
      body: { ...item, id: item.id + 1000, created_at: '2000-01-01T00:00:00Z', price: '9' },
    });

    const problem = expectProblem(reply, 422, 'read-only-field');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/id', '#/created_at']);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}: 404 not-found (not 412) when the item does not exist, whatever If-Match says', async () => {
    const before = await storedInventory(test);
    const reply = await test.call({
      method: 'PUT',
      url: '/v1/items/424242',
      headers: { 'if-match': '"v1"' },
      body: buildItem(),
    });
    expectProblem(reply, 404, 'not-found');
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('PATCH /v1/items/{id}', () => {
  it('PATCH /v1/items/{id}: 200 changing only the members present when the body is application/merge-patch+json', async () => {
    const { item } = await createItem(test, { price: '1.00' });

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}`,
      headers: MERGE_PATCH,
      body: JSON.stringify({ price: '12.5' }),
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
    expect(reply.json).toEqual({ ...item, price: '12.50', updated_at: expect.any(String) });
    expect(await storedItem(item.id)).toMatchObject({ name: item.name, sku: item.sku, price: 1250, version: 2 });
  });

  it.each(BAD_PRICES)(
    'PATCH /v1/items/{id}: 422 validation-failed at #/price when the price is %s, and nothing changes',
    async (_case, raw, detail) => {
      const { item } = await createItem(test);
      const before = await storedInventory(test);

      const reply = await test.call({
        method: 'PATCH',
        url: `/v1/items/${item.id}`,
        headers: MERGE_PATCH,
        body: `{"price":${raw}}`,
      });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/price', detail }]);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it("PATCH /v1/items/{id}: 409 sku-taken when the SKU is another item's, and nothing changes", async () => {
    const { item: first } = await createItem(test);
    const { item: second } = await createItem(test);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${second.id}`,
      headers: MERGE_PATCH,
      body: JSON.stringify({ sku: first.sku }),
    });

    const problem = expectProblem(reply, 409, 'sku-taken');
    expect(problem.detail).toContain(first.sku);
    expect(await storedInventory(test)).toEqual(before);
  });

  it("PATCH /v1/items/{id}: 200 when the SKU is the item's own (nothing changes, same ETag)", async () => {
    const { item, etag } = await createItem(test);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}`,
      headers: MERGE_PATCH,
      body: JSON.stringify({ sku: item.sku }),
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(etag);
    expect(await storedItem(item.id)).toMatchObject({ sku: item.sku, version: 1 });
  });

  it('PATCH /v1/items/{id}: 412 precondition-failed when If-Match is stale, and nothing changes', async () => {
    const { item } = await createItem(test);
    await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}`,
      headers: MERGE_PATCH,
      body: JSON.stringify({ name: 'Moved On' }),
    });
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}`,
      headers: { ...MERGE_PATCH, 'if-match': '"v1"' },
      body: JSON.stringify({ price: '7' }),
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('DELETE /v1/items/{id}', () => {
  it('DELETE /v1/items/{id}: 204 when the item is on no order, and the item, its stock and its movements are gone', async () => {
    const { item } = await createItem(test);
    const { item: bystander } = await createItem(test);
    await setStock(test, item.id, 5);
    await setStock(test, item.id, 2);
    await setStock(test, bystander.id, 3);
    expect(await storedMovements(item.id)).toHaveLength(2);
    const bystanderBefore = {
      item: await storedItem(bystander.id),
      stock: await storedStock(bystander.id),
      movements: await storedMovements(bystander.id),
    };

    const reply = await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` });

    expect(reply.status).toBe(204);
    expect(reply.text).toBe('');
    expect(await storedItem(item.id)).toBeUndefined();
    expect(await storedStock(item.id)).toBeUndefined();
    expect(await storedMovements(item.id)).toEqual([]);
    expectProblem(await test.call({ url: `/v1/items/${item.id}` }), 404, 'not-found');
    expectProblem(await test.call({ url: `/v1/items/${item.id}/stock` }), 404, 'not-found');
    expectProblem(await test.call({ url: `/v1/items/${item.id}/stock/movements` }), 404, 'not-found');
    expect({
      item: await storedItem(bystander.id),
      stock: await storedStock(bystander.id),
      movements: await storedMovements(bystander.id),
    }).toEqual(bystanderBefore);
  });

  it('DELETE /v1/items/{id}: 409 item-in-use when a placed order has the item, and the item, stock, ledger and order stay', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const orderId = await placeOrder(item.id, 2);
    const before = await storedInventory(test);
    const linesBefore = await test.storage.db
      .selectFrom('order_lines')
      .selectAll()
      .where('item_id', '=', item.id)
      .execute();

    const reply = await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` });

    const problem = expectProblem(reply, 409, 'item-in-use');
    expect(problem.detail).toContain(`Item ${item.id}`);
    expect(await storedInventory(test)).toEqual(before);
    expect(linesBefore.map((line) => line.order_id)).toEqual([orderId]);
    expect(
      await test.storage.db.selectFrom('order_lines').selectAll().where('item_id', '=', item.id).execute(),
    ).toEqual(linesBefore);
    expect((await test.call({ url: `/v1/items/${item.id}` })).status).toBe(200);
    expect((await test.call({ url: `/v1/items/${item.id}/stock` })).json).toMatchObject({ quantity: 3, reserved: 2 });
  });

  it('DELETE /v1/items/{id}: 409 item-in-use when the only order with the item is cancelled (closed orders count too), and nothing changes', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const orderId = await placeOrder(item.id, 1);
    expect(
      (await test.call({ method: 'PATCH', url: `/v1/orders/${orderId}`, body: { status: 'cancelled' } })).status,
    ).toBe(200);
    const before = await storedInventory(test);

    const reply = await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` });

    expectProblem(reply, 409, 'item-in-use');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('DELETE /v1/items/{id}: 412 precondition-failed when If-Match is stale, and nothing is deleted', async () => {
    const { item } = await createItem(test);
    await test.call({ method: 'PATCH', url: `/v1/items/${item.id}`, body: { name: 'Renamed' } });
    const before = await storedInventory(test);

    const reply = await test.call({ method: 'DELETE', url: `/v1/items/${item.id}`, headers: { 'if-match': '"v1"' } });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('DELETE /v1/items/{id}: 404 not-found when the item does not exist', async () => {
    const before = await storedInventory(test);
    expectProblem(await test.call({ method: 'DELETE', url: '/v1/items/555555' }), 404, 'not-found');
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('unknown items', () => {
  it.each([
    ['GET', '/v1/items/999999', undefined],
    ['GET', '/v1/items/999999/stock', undefined],
    ['PUT', '/v1/items/999999/stock', { quantity: 1 }],
    ['PATCH', '/v1/items/999999/stock', { quantity: 1 }],
    ['GET', '/v1/items/999999/stock/movements', undefined],
  ] as const)('%s %s: 404 not-found when the item does not exist, and nothing is stored', async (method, url, body) => {
    const before = await storedInventory(test);

    const reply = await test.call({ method, url, body });

    const problem = expectProblem(reply, 404, 'not-found');
    expect(problem.instance).toBe(url);
    expect(problem.detail).toBe('There is no item 999999.');
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('GET /v1/items/{id}/stock', () => {
  it('GET /v1/items/{id}/stock: 200 with quantity 0, reserved 0 and ETag "v1" when the item is new', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({ url: `/v1/items/${item.id}/stock` });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json).toEqual({ item_id: item.id, quantity: 0, reserved: 0, updated_at: item.created_at });
  });

  it('GET /v1/items/{id}/stock: 304 without a body when If-None-Match holds the current ETag; 200 once the stock has changed', async () => {
    const { item } = await createItem(test);
    const etag = await setStock(test, item.id, 4);

    const cached = await test.call({ url: `/v1/items/${item.id}/stock`, headers: { 'if-none-match': etag } });
    await setStock(test, item.id, 5);
    const stale = await test.call({ url: `/v1/items/${item.id}/stock`, headers: { 'if-none-match': etag } });

    expect(etag).toBe('"v2"');
    expect(cached.status).toBe(304);
    expect(cached.text).toBe('');
    expect(cached.headers.etag).toBe(etag);
    expect(stale.status).toBe(200);
    expect(stale.headers.etag).toBe('"v3"');
    expect(stale.json.quantity).toBe(5);
  });

  it('GET /v1/items/{id}/stock: the XML representation has its own ETag', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 6);

    const reply = await test.call({ url: `/v1/items/${item.id}/stock`, headers: { accept: 'application/xml' } });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.etag).toBe('"v2-xml"');
    expect(reply.text).toMatch(
      new RegExp(
        `^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<stock><item_id>${item.id}</item_id><quantity>6</quantity><reserved>0</reserved><updated_at>[^<]+</updated_at></stock>$`,
      ),
    );
  });
});

describe('PUT /v1/items/{id}/stock', () => {
  it('PUT /v1/items/{id}/stock: 200 with a new ETag when If-Match is fresh, and a set movement records the change', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'if-match': '"v1"' },
      body: { quantity: 7 },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
    expect(reply.json).toEqual({
      item_id: item.id,
      quantity: 7,
      reserved: 0,
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    expect(await storedStock(item.id)).toEqual({
      item_id: item.id,
      quantity: 7,
      reserved: 0,
      fulfilled: 0,
      version: 2,
      updated_at: reply.json.updated_at,
    });
    expect(await storedMovements(item.id)).toEqual([
      {
        id: expect.any(Number),
        item_id: item.id,
        kind: 'set',
        quantity_change: 7,
        reserved_change: 0,
        quantity_after: 7,
        reserved_after: 0,
        order_id: null,
        created_at: reply.json.updated_at,
      },
    ]);
  });

  it('PUT /v1/items/{id}/stock: 200 when If-Match holds the current XML ETag, and the change down is recorded as new - old', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 10);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'if-match': '"v2-xml"' },
      body: { quantity: 4 },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v3"');
    expect((await storedMovements(item.id)).map((move) => [move.quantity_change, move.quantity_after])).toEqual([
      [10, 10],
      [-6, 4],
    ]);
  });

  it('PUT /v1/items/{id}/stock: 200 with the same ETag, and no movement, when the quantity is the stored one', async () => {
    const { item } = await createItem(test);
    const etag = await setStock(test, item.id, 7);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'if-match': etag },
      body: { quantity: 7 },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(etag);
    expect(reply.json).toEqual({
      item_id: item.id,
      quantity: 7,
      reserved: 0,
      updated_at: before.stock.find((row) => row.item_id === item.id)!.updated_at,
    });
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}/stock: 200 when the quantity is the largest allowed (10^12)', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      body: { quantity: 1_000_000_000_000 },
    });

    expect(reply.status).toBe(200);
    expect(reply.json.quantity).toBe(1_000_000_000_000);
    expect((await storedStock(item.id))?.quantity).toBe(1_000_000_000_000);
  });

  it.each([
    ['-1', { quantity: -1 }, 'must be at least 0'],
    ['1.5', { quantity: 1.5 }, 'must be an integer'],
    ['the string "2"', { quantity: '2' }, 'must be an integer'],
    ['null', { quantity: null }, 'must be an integer'],
    ['10^12 + 1', { quantity: 1_000_000_000_001 }, 'must be at most 1000000000000'],
    ['missing', {}, 'is required'],
  ])(
    'PUT /v1/items/{id}/stock: 422 validation-failed at #/quantity when the quantity is %s, and stock and ledger are unchanged',
    async (_case, body, detail) => {
      const { item } = await createItem(test);
      await setStock(test, item.id, 3);
      const before = await storedInventory(test);

      const reply = await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/quantity', detail }]);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('PUT /v1/items/{id}/stock: 412 precondition-failed when If-Match is stale, and stock and ledger are unchanged', async () => {
    const { item } = await createItem(test);
    const staleEtag = await setStock(test, item.id, 3);
    await setStock(test, item.id, 4);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'if-match': staleEtag },
      body: { quantity: 9 },
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}/stock: 412 precondition-failed when If-Match is a weak tag (strong comparison), and nothing changes', async () => {
    const { item } = await createItem(test);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'if-match': 'W/"v1"' },
      body: { quantity: 9 },
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}/stock: 200 when item_id, reserved and updated_at echo the stored values (updated_at compared as an instant)', async () => {
    const { item } = await createItem(test);
    const stock = (await test.call({ url: `/v1/items/${item.id}/stock` })).json;
    const echoedUpdatedAt = String(stock.updated_at).replace('Z', '+00:00');

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      body: { ...stock, updated_at: echoedUpdatedAt, quantity: 3 },
    });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ item_id: item.id, quantity: 3, reserved: 0 });
    expect(await storedMovements(item.id)).toHaveLength(1);
  });

  it('PUT /v1/items/{id}/stock: 422 read-only-field when item_id, reserved or updated_at differ from the stored values, and stock and ledger are unchanged', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 2);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      body: { item_id: item.id + 1, quantity: 3, reserved: 5, updated_at: '2000-01-01T00:00:00Z' },
    });

    const problem = expectProblem(reply, 422, 'read-only-field');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/item_id', '#/reserved', '#/updated_at']);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PUT /v1/items/{id}/stock: 200 setting only the unreserved quantity when an order holds units, and the ledger still sums to the stock', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const orderId = await placeOrder(item.id, 2);

    const reply = await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 10 } });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ quantity: 10, reserved: 2 });
    const movements = await storedMovements(item.id);
    expect(movements.map((move) => [move.kind, move.quantity_change, move.reserved_change, move.order_id])).toEqual([
      ['set', 5, 0, null],
      ['reserve', -2, 2, orderId],
      ['set', 7, 0, null],
    ]);
    expect(movements.reduce((sum, move) => sum + move.quantity_change, 0)).toBe(10);
    expect(movements.reduce((sum, move) => sum + move.reserved_change, 0)).toBe(2);
  });

  it('PUT /v1/items/{id}/stock: 200 when the body is XML, answered in XML when Accept asks for it', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/items/${item.id}/stock`,
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body: '<stock><quantity>5</quantity></stock>',
    });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.etag).toBe('"v2-xml"');
    expect(reply.text).toContain(`<stock><item_id>${item.id}</item_id><quantity>5</quantity><reserved>0</reserved>`);
    expect(await storedStock(item.id)).toMatchObject({ quantity: 5, version: 2 });
  });
});

describe('PATCH /v1/items/{id}/stock', () => {
  it('PATCH /v1/items/{id}/stock: 200 with a new ETag when If-Match is fresh (application/merge-patch+json), and a set movement records the change', async () => {
    const { item } = await createItem(test);
    const etag = await setStock(test, item.id, 3);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}/stock`,
      headers: { ...MERGE_PATCH, 'if-match': etag },
      body: JSON.stringify({ quantity: 8 }),
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v3"');
    expect(reply.json).toEqual({ item_id: item.id, quantity: 8, reserved: 0, updated_at: expect.any(String) });
    expect(await storedStock(item.id)).toMatchObject({
      quantity: 8,
      reserved: 0,
      version: 3,
      updated_at: reply.json.updated_at,
    });
    expect((await storedMovements(item.id)).at(-1)).toMatchObject({
      kind: 'set',
      quantity_change: 5,
      quantity_after: 8,
      order_id: null,
      created_at: reply.json.updated_at,
    });
  });

  it('PATCH /v1/items/{id}/stock: 200 with the same ETag, and no movement, when the patch is empty', async () => {
    const { item } = await createItem(test);
    const etag = await setStock(test, item.id, 3);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}/stock`,
      headers: MERGE_PATCH,
      body: '{}',
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(etag);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PATCH /v1/items/{id}/stock: 412 precondition-failed when If-Match is stale, and stock and ledger are unchanged', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 3);
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PATCH',
      url: `/v1/items/${item.id}/stock`,
      headers: { ...MERGE_PATCH, 'if-match': '"v1"' },
      body: JSON.stringify({ quantity: 9 }),
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });

  it.each([
    ['-1', -1],
    ['1.5', 1.5],
    ['the string "2"', '2'],
  ])(
    'PATCH /v1/items/{id}/stock: 422 validation-failed at #/quantity when the quantity is %s, and stock and ledger are unchanged',
    async (_case, quantity) => {
      const { item } = await createItem(test);
      await setStock(test, item.id, 3);
      const before = await storedInventory(test);

      const reply = await test.call({
        method: 'PATCH',
        url: `/v1/items/${item.id}/stock`,
        headers: MERGE_PATCH,
        body: JSON.stringify({ quantity }),
      });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/quantity']);
      expect(await storedInventory(test)).toEqual(before);
    },
  );
});

describe('GET /v1/items/{id}/stock/movements', () => {
  it('GET /v1/items/{id}/stock/movements: pages of 2, newest first, when following next_cursor, and quantity_change sums to the quantity', async () => {
    const { item } = await createItem(test);
    for (const quantity of [4, 9, 2, 6, 1]) await setStock(test, item.id, quantity);

    const pages = [];
    let url: string | undefined = `/v1/items/${item.id}/stock/movements?limit=2`;
    while (url !== undefined) {
      const page = await test.call({ url });
      expect(page.status).toBe(200);
      pages.push(page);
      url =
        page.json.next_cursor === null
          ? undefined
          : `/v1/items/${item.id}/stock/movements?limit=2&cursor=${page.json.next_cursor}`;
    }

    expect(pages.map((page) => page.json.data.length)).toEqual([2, 2, 1]);
    expect(pages[0]!.headers.link).toBe(
      `</v1/items/${item.id}/stock/movements?limit=2&cursor=${pages[0]!.json.next_cursor}>; rel="next"`,
    );
    expect(pages[2]!.headers.link).toBeUndefined();
    const movements = pages.flatMap((page) => page.json.data as Movement[]);
    expect(movements.map((move) => move.quantity_after)).toEqual([1, 6, 2, 9, 4]);
    expect(movements.map((move) => move.quantity_change)).toEqual([-5, 4, -7, 5, 4]);
    expect(movements.every((move) => move.kind === 'set' && move.order_id === null && move.item_id === item.id)).toBe(
      true,
    );
    const ids = movements.map((move) => move.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    const stock = await test.call({ url: `/v1/items/${item.id}/stock` });
    expect(movements.reduce((sum, move) => sum + move.quantity_change, 0)).toBe(stock.json.quantity);
    expect(stock.json.quantity).toBe(1);
    const stored = await storedMovements(item.id);
    expect([...stored].reverse()).toEqual(movements);
  });

  it('GET /v1/items/{id}/stock/movements: 200 with only the matching movements when filtered by kind and order_id', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    const firstOrder = await placeOrder(item.id, 1);
    const secondOrder = await placeOrder(item.id, 2);

    const sets = await test.call({ url: `/v1/items/${item.id}/stock/movements?kind=set` });
    const reserves = await test.call({ url: `/v1/items/${item.id}/stock/movements?kind=reserve` });
    const ofSecond = await test.call({ url: `/v1/items/${item.id}/stock/movements?order_id=${secondOrder}` });

    expect(sets.status).toBe(200);
    expect(sets.json.data.map((move: Movement) => [move.kind, move.quantity_change])).toEqual([['set', 5]]);
    expect(
      reserves.json.data.map((move: Movement) => [move.order_id, move.quantity_change, move.reserved_change]),
    ).toEqual([
      [secondOrder, -2, 2],
      [firstOrder, -1, 1],
    ]);
    expect(ofSecond.json).toEqual({
      data: [
        {
          id: expect.any(Number),
          item_id: item.id,
          kind: 'reserve',
          quantity_change: -2,
          reserved_change: 2,
          quantity_after: 2,
          reserved_after: 3,
          order_id: secondOrder,
          created_at: expect.any(String),
        },
      ],
      next_cursor: null,
    });
  });

  it('GET /v1/items/{id}/stock/movements: 200 with no movements when the stock was never set', async () => {
    const { item } = await createItem(test);
    const reply = await test.call({ url: `/v1/items/${item.id}/stock/movements` });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ data: [], next_cursor: null });
  });

  it('GET /v1/items/{id}/stock/movements: 400 invalid-query naming every movement kind when kind is not one', async () => {
    const { item } = await createItem(test);

    const reply = await test.call({ url: `/v1/items/${item.id}/stock/movements?kind=restock` });

    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/kind']);
    for (const kind of ['set', 'reserve', 'release', 'fulfil'])
      expect(problem.errors?.[0]?.detail).toContain(`"${kind}"`);
  });
});
