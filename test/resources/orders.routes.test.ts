import { dereferenced } from '../helpers/openapi.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';
import { storedInventory } from '../helpers/stored.js';

let test: TestApp;
let userId: number;
beforeAll(async () => {
  test = await startApp();
  userId = (await createUser(test)).user.id;
});
afterAll(() => test.close());

/** An item with the given price and on-hand stock; returns its id. */
async function stockedItem(price = '2.50', quantity = 10): Promise<number> {
  const { item } = await createItem(test, { price });
  await setStock(test, item.id, quantity);
  return item.id;
}

function placeOrder(lines: unknown, overrides: Record<string, unknown> = {}) {
  return test.call({ method: 'POST', url: '/v1/orders', body: { name: 'SO-1', user_id: userId, lines, ...overrides } });
}

function patchOrder(id: number, body: unknown, headers: Record<string, string> = {}) {
  return test.call({
    method: 'PATCH',
    url: `/v1/orders/${id}`,
    headers: { 'content-type': 'application/merge-patch+json', ...headers },
    body: JSON.stringify(body),
  });
}

async function stockOf(itemId: number) {
  return test.storage.db
    .selectFrom('stock')
    .select(['quantity', 'reserved', 'fulfilled'])
    .where('item_id', '=', itemId)
    .executeTakeFirstOrThrow();
}

describe('POST /v1/orders', () => {
  it('POST /v1/orders: 201 with Location, ETag, captured prices and total, and every line reserved, when stock covers the order', async () => {
    const widget = await stockedItem('2.50', 10);
    const gadget = await stockedItem('10', 3);

    const reply = await placeOrder([
      { item_id: widget, quantity: 2 },
      { item_id: gadget, quantity: 1 },
      { item_id: widget, quantity: 1 },
    ]);

    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/orders/${reply.json.id}`);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json).toEqual({
      id: expect.any(Number),
      name: 'SO-1',
      user_id: userId,
      status: 'placed',
      // Duplicate item lines are merged, at the position of the first.
      lines: [
        { item_id: widget, quantity: 3, unit_price: '2.50', line_total: '7.50' },
        { item_id: gadget, quantity: 1, unit_price: '10.00', line_total: '10.00' },
      ],
      total: '17.50',
      created_by: 1,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await stockOf(widget)).toEqual({ quantity: 7, reserved: 3, fulfilled: 0 });
    expect(await stockOf(gadget)).toEqual({ quantity: 2, reserved: 1, fulfilled: 0 });
    const movements = await test.call({ url: `/v1/items/${widget}/stock/movements` });
    expect(movements.json.data[0]).toMatchObject({
      kind: 'reserve',
      quantity_change: -3,
      reserved_change: 3,
      quantity_after: 7,
      reserved_after: 3,
      order_id: reply.json.id,
    });
  });

  it('POST /v1/orders: the order keeps the price captured when it was placed after the item price changes', async () => {
    const item = await stockedItem('1.00', 5);
    const placed = await placeOrder([{ item_id: item, quantity: 2 }]);
    await test.call({
      method: 'PATCH',
      url: `/v1/items/${item}`,
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ price: '9.99' }),
    });

    const read = await test.call({ url: `/v1/orders/${placed.json.id}` });

    expect(read.json.lines).toEqual([{ item_id: item, quantity: 2, unit_price: '1.00', line_total: '2.00' }]);
    expect(read.json.total).toBe('2.00');
  });

  it('POST /v1/orders: 409 insufficient-stock listing every short line, and nothing is reserved, not even the lines that would fit', async () => {
    const plenty = await stockedItem('1.00', 100);
    const scarce = await stockedItem('1.00', 2);
    const none = await stockedItem('1.00', 0);
    const before = await storedInventory(test);

    const reply = await placeOrder([
      { item_id: plenty, quantity: 5 },
      { item_id: scarce, quantity: 3 },
      { item_id: none, quantity: 1 },
    ]);

    const problem = expectProblem(reply, 409, 'insufficient-stock');
    expect(problem.short_lines).toEqual([
      { item_id: scarce, requested: 3, available: 2 },
      { item_id: none, requested: 1, available: 0 },
    ]);
    expect(await storedInventory(test)).toEqual(before);
  });

  const badLines: [string, unknown, string][] = [
    ['no lines', [], '#/lines'],
    ['101 lines', Array.from({ length: 101 }, (_, index) => ({ item_id: index + 1, quantity: 1 })), '#/lines'],
    ['quantity 0', [{ item_id: 1, quantity: 0 }], '#/lines/0/quantity'],
    ['quantity -1', [{ item_id: 1, quantity: -1 }], '#/lines/0/quantity'],
    ['quantity 1.5', [{ item_id: 1, quantity: 1.5 }], '#/lines/0/quantity'],
    ['quantity "2"', [{ item_id: 1, quantity: '2' }], '#/lines/0/quantity'],
    ['quantity 2^53', [{ item_id: 1, quantity: 2 ** 53 }], '#/lines/0/quantity'],
    ['a line without item_id', [{ quantity: 1 }], '#/lines/0/item_id'],
  ];
  it.each(badLines)(
    'POST /v1/orders: 422 validation-failed pointing at %s, and nothing stored changes',
    async (_case, lines, pointer) => {
      await stockedItem('1.00', 10);
      const before = await storedInventory(test);

      const reply = await placeOrder(lines);

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors?.map((error) => error.pointer)).toContain(pointer);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('POST /v1/orders: 422 unknown-reference pointing at each line of an unknown item_id, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 10);
    const before = await storedInventory(test);

    const reply = await placeOrder([
      { item_id: item, quantity: 1 },
      { item_id: 999_999, quantity: 1 },
      { item_id: 999_999, quantity: 2 },
    ]);

    const problem = expectProblem(reply, 422, 'unknown-reference');
    expect(problem.errors).toEqual([
      { in: 'body', pointer: '#/lines/1/item_id', detail: 'there is no item 999999' },
      { in: 'body', pointer: '#/lines/2/item_id', detail: 'there is no item 999999' },
    ]);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('POST /v1/orders: 422 unknown-reference pointing at #/user_id when the user does not exist, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 10);
    const before = await storedInventory(test);

    const reply = await placeOrder([{ item_id: item, quantity: 1 }], { user_id: 999_999 });

    const problem = expectProblem(reply, 422, 'unknown-reference');
    expect(problem.errors).toEqual([{ in: 'body', pointer: '#/user_id', detail: 'there is no user 999999' }]);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('POST and PUT /v1/orders: 422 pointing at each line of an item whose lines add up to more than 1,000,000 units (lines are merged), nothing stored changes', async () => {
    const itemId = await stockedItem('1.00', 3_000_000);
    const before = await storedInventory(test);
    const lines = [
      { item_id: itemId, quantity: 1_000_000 },
      { item_id: itemId, quantity: 1 },
    ];
    const problem = expectProblem(await placeOrder(lines), 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/lines/0/quantity', '#/lines/1/quantity']);
    expect(problem.errors?.[0]?.detail).toBe(
      `the lines of item ${itemId} add up to 1000001 units, more than the 1000000 of one line`,
    );
    expect(await storedInventory(test)).toEqual(before);

    const placed = await placeOrder([{ item_id: itemId, quantity: 1 }]);
    const replaced = await test.call({
      method: 'PUT',
      url: `/v1/orders/${placed.json.id}`,
      body: { name: 'SO-1', user_id: userId, lines },
    });
    expectProblem(replaced, 422, 'validation-failed');
    expect((await test.call({ url: `/v1/orders/${placed.json.id}` })).json).toEqual(placed.json);
  });

  it('POST /v1/orders: 201 with a total longer than any price (a million of the dearest item), written as the OpenAPI document says', async () => {
    const itemId = await stockedItem('9999999999.99', 1_000_000);
    const reply = await placeOrder([{ item_id: itemId, quantity: 900 }]);
    expect(reply.status).toBe(201);
    expect(reply.json.total).toBe('8999999999991.00');
    expect(reply.json.lines[0].line_total).toBe('8999999999991.00');
    const document = dereferenced(test.app.swagger()) as unknown as {
      paths: Record<
        string,
        Record<
          string,
          {
            responses: Record<
              string,
              { content: Record<string, { schema: { properties: Record<string, { pattern: string }> } }> }
            >;
          }
        >
      >;
    };
    const pattern =
      document.paths['/v1/orders']!.post!.responses['201']!.content['application/json']!.schema.properties.total!
        .pattern;
    expect(reply.json.total).toMatch(new RegExp(pattern));
  });

  it('POST /v1/orders: 201 in XML from an XML body with repeated line elements', async () => {
    const item = await stockedItem('3.00', 10);
    const reply = await test.call({
      method: 'POST',
      url: '/v1/orders',
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body: `<order><name>SO-XML</name><user_id>${userId}</user_id><lines><line><item_id>${item}</item_id><quantity>2</quantity></line></lines></order>`,
    });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toContain(
      `<lines><line><item_id>${item}</item_id><quantity>2</quantity><unit_price>3.00</unit_price><line_total>6.00</line_total></line></lines><total>6.00</total>`,
    );
  });

  it('POST /v1/orders: the same Idempotency-Key and body replay the first response and reserve once', async () => {
    const item = await stockedItem('1.00', 10);
    const send = () =>
      test.call({
        method: 'POST',
        url: '/v1/orders',
        headers: { 'idempotency-key': `order-${item}` },
        body: { name: 'SO-1', user_id: userId, lines: [{ item_id: item, quantity: 4 }] },
      });

    const first = await send();
    const second = await send();

    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json).toEqual(first.json);
    expect(await stockOf(item)).toEqual({ quantity: 6, reserved: 4, fulfilled: 0 });
  });
});

describe('PATCH /v1/orders/{id}', () => {
  it('PATCH /v1/orders/{id}: placed → fulfilled takes the reserved units out of inventory', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 4 }])).json;

    const reply = await patchOrder(order.id, { status: 'fulfilled' });

    expect(reply.status).toBe(200);
    expect(reply.json.status).toBe('fulfilled');
    expect(reply.headers.etag).toBe('"v2"');
    expect(await stockOf(item)).toEqual({ quantity: 6, reserved: 0, fulfilled: 4 });
    const movements = await test.call({ url: `/v1/items/${item}/stock/movements?kind=fulfil` });
    expect(movements.json.data).toMatchObject([
      { kind: 'fulfil', quantity_change: 0, reserved_change: -4, order_id: order.id },
    ]);
  });

  it('PATCH /v1/orders/{id}: placed → cancelled returns the reserved units to stock', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 4 }])).json;

    const reply = await patchOrder(order.id, { status: 'cancelled' });

    expect(reply.status).toBe(200);
    expect(reply.json.status).toBe('cancelled');
    expect(await stockOf(item)).toEqual({ quantity: 10, reserved: 0, fulfilled: 0 });
  });

  const illegal: [string, 'fulfilled' | 'cancelled', string][] = [
    ['fulfilled → cancelled', 'fulfilled', 'cancelled'],
    ['fulfilled → placed', 'fulfilled', 'placed'],
    ['cancelled → fulfilled', 'cancelled', 'fulfilled'],
    ['cancelled → placed', 'cancelled', 'placed'],
  ];
  it.each(illegal)(
    'PATCH /v1/orders/{id}: 409 invalid-transition for %s, and nothing stored changes',
    async (_case, from, to) => {
      const item = await stockedItem('1.00', 10);
      const order = (await placeOrder([{ item_id: item, quantity: 2 }])).json;
      await patchOrder(order.id, { status: from });
      const before = await storedInventory(test);

      const reply = await patchOrder(order.id, { status: to });

      const problem = expectProblem(reply, 409, 'invalid-transition');
      expect(problem.current_status).toBe(from);
      expect(problem.allowed_statuses).toEqual([]);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('PATCH /v1/orders/{id}: 409 invalid-transition when the status is not an order status, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 2 }])).json;
    const before = await storedInventory(test);

    const reply = await patchOrder(order.id, { status: 'shipped' });

    const problem = expectProblem(reply, 409, 'invalid-transition');
    expect(problem.detail).toContain('"shipped" is not an order status');
    expect(problem.allowed_statuses).toEqual(['fulfilled', 'cancelled']);
    expect(await storedInventory(test)).toEqual(before);
  });

  it('PATCH /v1/orders/{id}: 412 with a stale If-Match, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 2 }])).json;
    await patchOrder(order.id, { name: 'renamed' });
    const before = await storedInventory(test);

    const reply = await patchOrder(order.id, { status: 'fulfilled' }, { 'if-match': '"v1"' });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('PUT /v1/orders/{id}', () => {
  it('PUT /v1/orders/{id}: replaces the lines of a placed order, reserving and releasing only the difference', async () => {
    const kept = await stockedItem('1.00', 10);
    const dropped = await stockedItem('2.00', 10);
    const added = await stockedItem('3.00', 10);
    const order = (
      await placeOrder([
        { item_id: kept, quantity: 2 },
        { item_id: dropped, quantity: 3 },
      ])
    ).json;

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/orders/${order.id}`,
      body: {
        name: 'SO-1b',
        user_id: userId,
        lines: [
          { item_id: kept, quantity: 5 },
          { item_id: added, quantity: 1 },
        ],
      },
    });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ name: 'SO-1b', status: 'placed', total: '8.00' });
    expect(reply.json.lines).toEqual([
      { item_id: kept, quantity: 5, unit_price: '1.00', line_total: '5.00' },
      { item_id: added, quantity: 1, unit_price: '3.00', line_total: '3.00' },
    ]);
    expect(await stockOf(kept)).toEqual({ quantity: 5, reserved: 5, fulfilled: 0 });
    expect(await stockOf(dropped)).toEqual({ quantity: 10, reserved: 0, fulfilled: 0 });
    expect(await stockOf(added)).toEqual({ quantity: 9, reserved: 1, fulfilled: 0 });
    const keptMovements = await test.call({ url: `/v1/items/${kept}/stock/movements` });
    expect(keptMovements.json.data[0]).toMatchObject({
      kind: 'reserve',
      quantity_change: -3,
      reserved_change: 3,
      order_id: order.id,
    });
  });

  it('PUT /v1/orders/{id}: 409 insufficient-stock counts what the order already holds as available, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 5);
    const order = (await placeOrder([{ item_id: item, quantity: 3 }])).json;
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/orders/${order.id}`,
      body: { name: 'SO-1', user_id: userId, lines: [{ item_id: item, quantity: 6 }] },
    });

    const problem = expectProblem(reply, 409, 'insufficient-stock');
    expect(problem.short_lines).toEqual([{ item_id: item, requested: 6, available: 5 }]);
    expect(await storedInventory(test)).toEqual(before);
  });

  it.each(['fulfilled', 'cancelled'] as const)(
    'PUT /v1/orders/{id}: 409 order-not-placed when the order is %s, and nothing stored changes',
    async (status) => {
      const item = await stockedItem('1.00', 10);
      const order = (await placeOrder([{ item_id: item, quantity: 2 }])).json;
      await patchOrder(order.id, { status });
      const before = await storedInventory(test);

      const reply = await test.call({
        method: 'PUT',
        url: `/v1/orders/${order.id}`,
        body: { name: 'SO-1', user_id: userId, lines: [{ item_id: item, quantity: 1 }] },
      });

      const problem = expectProblem(reply, 409, 'order-not-placed');
      expect(problem.current_status).toBe(status);
      expect(await storedInventory(test)).toEqual(before);
    },
  );

  it('PUT /v1/orders/{id}: 422 read-only-field when the body changes the total, and nothing stored changes', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 2 }])).json;
    const before = await storedInventory(test);

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/orders/${order.id}`,
      body: { name: 'SO-1', user_id: userId, lines: [{ item_id: item, quantity: 1 }], total: '0.01' },
    });

    const problem = expectProblem(reply, 422, 'read-only-field');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/total']);
    expect(await storedInventory(test)).toEqual(before);
  });
});

describe('DELETE /v1/orders/{id}', () => {
  it('DELETE /v1/orders/{id}: 204 and a placed order releases what it reserved', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 4 }])).json;

    const reply = await test.call({ method: 'DELETE', url: `/v1/orders/${order.id}` });

    expect(reply.status).toBe(204);
    expect(await stockOf(item)).toEqual({ quantity: 10, reserved: 0, fulfilled: 0 });
    expect((await test.call({ url: `/v1/orders/${order.id}` })).status).toBe(404);
    const movements = await test.call({ url: `/v1/items/${item}/stock/movements` });
    expect(movements.json.data[0]).toMatchObject({
      kind: 'release',
      quantity_change: 4,
      reserved_change: -4,
      order_id: order.id,
    });
  });

  it('DELETE /v1/orders/{id}: a fulfilled order releases nothing (its units have left)', async () => {
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 4 }])).json;
    await patchOrder(order.id, { status: 'fulfilled' });

    expect((await test.call({ method: 'DELETE', url: `/v1/orders/${order.id}` })).status).toBe(204);
    expect(await stockOf(item)).toEqual({ quantity: 6, reserved: 0, fulfilled: 4 });
  });
});

describe('orders and users', () => {
  it('DELETE /v1/users/{id}: 409 user-has-open-orders while an order is placed; once it is closed, 204 and the order keeps user_id null', async () => {
    const { user } = await createUser(test);
    const item = await stockedItem('1.00', 10);
    const order = (await placeOrder([{ item_id: item, quantity: 1 }], { user_id: user.id })).json;

    expectProblem(await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` }), 409, 'user-has-open-orders');
    expect((await test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);

    await patchOrder(order.id, { status: 'fulfilled' });
    expect((await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` })).status).toBe(204);
    expect((await test.call({ url: `/v1/orders/${order.id}` })).json.user_id).toBeNull();
  });
});

describe('GET /v1/orders', () => {
  it('GET /v1/orders: filters by status and user_id, sorts by total, and pages with a cursor', async () => {
    const { user } = await createUser(test);
    const item = await stockedItem('1.00', 100);
    const totals = [5, 1, 3, 2];
    const ids: number[] = [];
    for (const quantity of totals)
      ids.push((await placeOrder([{ item_id: item, quantity }], { user_id: user.id })).json.id);
    await patchOrder(ids[3]!, { status: 'cancelled' });

    const first = await test.call({ url: `/v1/orders?user_id=${user.id}&status=placed&sort=-total&limit=2` });
    const second = await test.call({
      url: `/v1/orders?user_id=${user.id}&status=placed&sort=-total&limit=2&cursor=${first.json.next_cursor}`,
    });

    expect(first.json.data.map((order: { total: string }) => order.total)).toEqual(['5.00', '3.00']);
    expect(first.headers.link).toContain('rel="next"');
    expect(second.json.data.map((order: { total: string }) => order.total)).toEqual(['1.00']);
    expect(second.json.next_cursor).toBeNull();
    expect(second.json.data[0].lines).toEqual([{ item_id: item, quantity: 1, unit_price: '1.00', line_total: '1.00' }]);
  });

  it('GET /v1/orders: each order with its own lines in position order, whether the orders listed lie close together or far apart, in id order or not', async () => {
    const { user: mine } = await createUser(test);
    const { user: other } = await createUser(test);
    const [first, second] = [await stockedItem('1.00', 100), await stockedItem('2.00', 100)];
    const placed = new Map<number, { id: number; lines: unknown[] }[]>([
      [mine.id, []],
      [other.id, []],
    ]);
    // Mine: orders 0, 3 and 7 (far apart for three); the other's: 1, 2, 4, 5, 6 (close, one of mine between).
    for (let n = 0; n < 8; n++) {
      const lines = [
        { item_id: n % 2 === 0 ? first : second, quantity: n + 1 },
        { item_id: n % 2 === 0 ? second : first, quantity: 1 },
      ];
      const owner = [0, 3, 7].includes(n) ? mine.id : other.id;
      const order = await placeOrder(lines, { user_id: owner });
      expect(order.status).toBe(201);
      placed.get(owner)!.push(order.json);
    }
    for (const owner of [mine.id, other.id]) {
      const listed = await test.call({ url: `/v1/orders?user_id=${owner}` });
      expect(listed.json.data.map((order: { id: number; lines: unknown[] }) => [order.id, order.lines])).toEqual(
        placed.get(owner)!.map((order) => [order.id, order.lines]),
      );
      const backwards = await test.call({ url: `/v1/orders?user_id=${owner}&sort=-id` });
      expect(backwards.json.data.map((order: { id: number; lines: unknown[] }) => [order.id, order.lines])).toEqual(
        placed
          .get(owner)!
          .map((order) => [order.id, order.lines])
          .reverse(),
      );
    }
  });

  it('GET /v1/orders: 400 invalid-query for an unknown status filter', async () => {
    expectProblem(await test.call({ url: '/v1/orders?status=shipped' }), 400, 'invalid-query');
  });
});

/**
 * A delete and an order that refers to the deleted record, at the same moment (on PostgreSQL they
 * really run side by side): whichever commits first decides, the other gets its 4xx, never a 500,
 * and no placed order is left without its user or item.
 */
describe('deleting what an order refers to, while the order is placed', () => {
  const ROUNDS = 20;

  it('DELETE /v1/users/{id} racing POST /v1/orders for that user: one wins; never a 500; never a placed order without its user', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 1000);
    const outcomes = new Set<string>();
    for (let round = 0; round < ROUNDS; round++) {
      const { user, etag } = await createUser(test);
      const [order, deleted] = await Promise.all([
        test.call({
          method: 'POST',
          url: '/v1/orders',
          body: { name: `race ${round}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
        }),
        test.call({ method: 'DELETE', url: `/v1/users/${user.id}`, headers: { 'if-match': etag } }),
      ]);
      outcomes.add(`${order.status}/${deleted.status}`);
      if (order.status === 201) {
        expectProblem(deleted, 409, 'user-has-open-orders');
        expect((await test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);
      } else {
        expect(deleted.status).toBe(204);
        if (order.status === 422) expectProblem(order, 422, 'unknown-reference');
        else expectProblem(order, 409, 'concurrent-change');
      }
    }
    const orphans = await test.storage.db
      .selectFrom('orders')
      .select('id')
      .where('status', '=', 'placed')
      .where('user_id', 'is', null)
      .execute();
    expect(orphans).toEqual([]);
    expect([...outcomes].every((outcome) => ['201/409', '422/204', '409/204'].includes(outcome))).toBe(true);
  });

  it('DELETE /v1/items/{id} racing POST /v1/orders for that item: one wins; never a 500; never an order line without its item', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { item, etag } = await createItem(test);
      await setStock(test, item.id, 10);
      const itemEtag = String((await test.call({ url: `/v1/items/${item.id}` })).headers.etag ?? etag);
      const [order, deleted] = await Promise.all([
        test.call({
          method: 'POST',
          url: '/v1/orders',
          body: { name: `race ${round}`, user_id: userId, lines: [{ item_id: item.id, quantity: 1 }] },
        }),
        test.call({ method: 'DELETE', url: `/v1/items/${item.id}`, headers: { 'if-match': itemEtag } }),
      ]);
      if (order.status === 201) {
        expectProblem(deleted, 409, 'item-in-use');
        expect((await test.call({ url: `/v1/items/${item.id}/stock` })).json).toMatchObject({
          quantity: 9,
          reserved: 1,
        });
      } else {
        expect(deleted.status).toBe(204);
        if (order.status === 422) expectProblem(order, 422, 'unknown-reference');
        else expectProblem(order, 409, 'concurrent-change');
      }
    }
  });
});
