import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { call, startApp, type TestApp } from '../helpers/app.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

/**
 * A request without a precondition never fails one: concurrent unconditional writes of the same
 * record, through two rowi instances on one database, all succeed (each applied after the other,
 * never a 412 "changed concurrently"), and the record ends at the version that counts them all.
 * With If-Match, exactly the writes that held the current ETag succeed.
 */
let test: TestApp;
let second: { app: FastifyInstance; storage: Storage };
beforeAll(async () => {
  test = await startApp();
  const storage = await openStorage(test.config, pino({ level: 'silent' }));
  const app = await buildApp({ config: test.config, storage, logger: pino({ level: 'silent' }) });
  await app.ready();
  second = { app, storage };
});
afterAll(async () => {
  await second.app.close();
  await second.storage.close();
  await test.close();
});

const WRITES = 24;
const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };

/** The same request WRITES times at once, alternating between the two instances. */
function concurrently(
  request: (index: number) => { method: 'PUT' | 'PATCH'; url: string; body: unknown; headers?: Record<string, string> },
) {
  return Promise.all(
    Array.from({ length: WRITES }, (_, index) => {
      const { body, headers = { 'content-type': 'application/json' }, ...rest } = request(index);
      const options = { ...rest, headers, body: JSON.stringify(body), key: test.adminKey };
      return index % 2 === 0 ? test.call(options) : call(second.app, options);
    }),
  );
}

const statusesOf = (replies: { status: number }[]) => [...new Set(replies.map((reply) => reply.status))];

describe('concurrent writes without If-Match, two instances on one database', () => {
  it('PATCH /v1/users/{id}: every one of 24 concurrent renames answers 200; the user ends at version 25', async () => {
    const { user } = await createUser(test);
    const replies = await concurrently((index) => ({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: MERGE_PATCH,
      body: { name: `Name ${index}` },
    }));
    expect(statusesOf(replies), replies.find((reply) => reply.status !== 200)?.text).toEqual([200]);
    const stored = await test.storage.db
      .selectFrom('users')
      .select(['version', 'name'])
      .where('id', '=', user.id)
      .executeTakeFirstOrThrow();
    expect(stored.version).toBe(WRITES + 1);
  });

  it('PUT /v1/items/{id}: every one of 24 concurrent replacements answers 200', async () => {
    const { item } = await createItem(test);
    const replies = await concurrently((index) => ({
      method: 'PUT',
      url: `/v1/items/${item.id}`,
      body: { name: `Item ${index}`, sku: item.sku, price: `${index + 1}.00` },
    }));
    expect(statusesOf(replies), replies.find((reply) => reply.status !== 200)?.text).toEqual([200]);
  });

  it('PATCH /v1/items/{id}/stock: every one of 24 concurrent quantities answers 200, and the ledger sums to the stored quantity', async () => {
    const { item } = await createItem(test);
    const replies = await concurrently((index) => ({
      method: 'PATCH',
      url: `/v1/items/${item.id}/stock`,
      headers: MERGE_PATCH,
      body: { quantity: 100 + index },
    }));
    expect(statusesOf(replies), replies.find((reply) => reply.status !== 200)?.text).toEqual([200]);
    const stock = await test.storage.db
      .selectFrom('stock')
      .select('quantity')
      .where('item_id', '=', item.id)
      .executeTakeFirstOrThrow();
    const movements = await test.storage.db
      .selectFrom('stock_movements')
      .select('quantity_change')
      .where('item_id', '=', item.id)
      .execute();
    expect(movements.reduce((sum, movement) => sum + movement.quantity_change, 0)).toBe(stock.quantity);
  });

  it('PATCH /v1/orders/{id}: every one of 24 concurrent renames answers 200', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 10);
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'concurrent', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    const replies = await concurrently((index) => ({
      method: 'PATCH',
      url: `/v1/orders/${order.json.id}`,
      headers: MERGE_PATCH,
      body: { name: `Order ${index}` },
    }));
    expect(statusesOf(replies), replies.find((reply) => reply.status !== 200)?.text).toEqual([200]);
  });

  it('POST /v1/orders: 24 concurrent orders naming the same three items in different orders all answer 201 (no deadlock); stock and ledger agree', async () => {
    const { user } = await createUser(test);
    const items = [(await createItem(test)).item, (await createItem(test)).item, (await createItem(test)).item];
    for (const item of items) await setStock(test, item.id, 100);
    const orderings = [
      [0, 1, 2],
      [2, 1, 0],
      [1, 2, 0],
      [0, 2, 1],
      [2, 0, 1],
      [1, 0, 2],
    ];
    const replies = await Promise.all(
      Array.from({ length: WRITES }, (_, index) => {
        const options = {
          method: 'POST' as const,
          url: '/v1/orders',
          key: test.adminKey,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            name: `Race ${index}`,
            user_id: user.id,
            lines: orderings[index % orderings.length]!.map((at) => ({ item_id: items[at]!.id, quantity: 1 + at })),
          }),
        };
        return index % 2 === 0 ? test.call(options) : call(second.app, options);
      }),
    );
    expect(statusesOf(replies), replies.find((reply) => reply.status !== 201)?.text).toEqual([201]);
    for (const [at, item] of items.entries()) {
      const stock = await test.storage.db
        .selectFrom('stock')
        .select(['quantity', 'reserved'])
        .where('item_id', '=', item.id)
        .executeTakeFirstOrThrow();
      expect(stock).toEqual({ quantity: 100 - WRITES * (1 + at), reserved: WRITES * (1 + at) });
      const movements = await test.storage.db
        .selectFrom('stock_movements')
        .select(['quantity_change', 'reserved_change'])
        .where('item_id', '=', item.id)
        .execute();
      expect(movements.reduce((sum, movement) => sum + movement.quantity_change, 0)).toBe(stock.quantity);
      expect(movements.reduce((sum, movement) => sum + movement.reserved_change, 0)).toBe(stock.reserved);
    }
  });

  it('POST /v1/orders: 24 concurrent two-line orders against stock for 10 of them: exactly 10 answer 201, the rest 409 insufficient-stock naming the short line, and nothing else is stored', async () => {
    const { user } = await createUser(test);
    const plenty = (await createItem(test)).item;
    const scarce = (await createItem(test)).item;
    await setStock(test, plenty.id, 1000);
    await setStock(test, scarce.id, 10);
    const replies = await Promise.all(
      Array.from({ length: WRITES }, (_, index) => {
        const lines = [
          { item_id: plenty.id, quantity: 2 },
          { item_id: scarce.id, quantity: 1 },
        ];
        const options = {
          method: 'POST' as const,
          url: '/v1/orders',
          key: test.adminKey,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            name: `Scarce ${index}`,
            user_id: user.id,
            lines: index % 2 === 0 ? lines : lines.reverse(),
          }),
        };
        return index % 2 === 0 ? test.call(options) : call(second.app, options);
      }),
    );
    expect(replies.filter((reply) => reply.status === 201)).toHaveLength(10);
    const refused = replies.filter((reply) => reply.status !== 201);
    expect(refused.map((reply) => [reply.status, reply.json.type])).toEqual(
      refused.map(() => [409, '/problems/insufficient-stock']),
    );
    for (const reply of refused)
      expect(reply.json.short_lines).toEqual([{ item_id: scarce.id, requested: 1, available: 0 }]);
    const stocks = await test.storage.db
      .selectFrom('stock')
      .select(['item_id', 'quantity', 'reserved'])
      .where('item_id', 'in', [plenty.id, scarce.id])
      .orderBy('item_id')
      .execute();
    expect(stocks).toEqual([
      { item_id: plenty.id, quantity: 980, reserved: 20 },
      { item_id: scarce.id, quantity: 0, reserved: 10 },
    ]);
    const orders = await test.storage.db.selectFrom('orders').select('id').where('name', 'like', 'Scarce %').execute();
    expect(orders).toHaveLength(10);
    const lines = await test.storage.db
      .selectFrom('order_lines')
      .select('order_id')
      .where(
        'order_id',
        'in',
        orders.map((order) => order.id),
      )
      .execute();
    expect(lines).toHaveLength(20);
    const movements = await test.storage.db
      .selectFrom('stock_movements')
      .select('id')
      .where('item_id', 'in', [plenty.id, scarce.id])
      .where('kind', '=', 'reserve')
      .execute();
    expect(movements).toHaveLength(20);
  });

  it('PATCH /v1/callers/{id} and /v1/weather/{place}: every one of 24 concurrent changes answers 200', async () => {
    const caller = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'concurrent-caller', role: 'reader' },
    });
    const callers = await concurrently((index) => ({
      method: 'PATCH',
      url: `/v1/callers/${caller.json.id}`,
      headers: MERGE_PATCH,
      body: { rate_limit: 100 + index },
    }));
    expect(statusesOf(callers), callers.find((reply) => reply.status !== 200)?.text).toEqual([200]);
    const places = await concurrently((index) => ({
      method: 'PATCH',
      url: '/v1/weather/concurrent-place',
      headers: MERGE_PATCH,
      body: { name: `Place ${index}` },
    }));
    expect(statusesOf(places).sort(), places.find((reply) => reply.status >= 300)?.text).toEqual(
      expect.arrayContaining([200]),
    );
    expect(places.every((reply) => reply.status === 200 || reply.status === 201)).toBe(true);
    expect(places.filter((reply) => reply.status === 201)).toHaveLength(1);
  });

  it('PATCH /v1/users/{id} with If-Match: of 24 concurrent renames holding the same ETag, exactly one answers 200 and the rest 412', async () => {
    const { user, etag } = await createUser(test);
    const replies = await concurrently((index) => ({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { ...MERGE_PATCH, 'if-match': etag },
      body: { name: `Conditional ${index}` },
    }));
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(1);
    expect(replies.filter((reply) => reply.status === 412)).toHaveLength(WRITES - 1);
  });
});
