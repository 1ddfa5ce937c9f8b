import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRowiClient,
  importFile,
  type Order,
  type Problem,
  type RowiClient,
  type StockBatchResult,
  type User,
  type UserBatch,
} from '../../clients/typescript/src/index.js';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';

/**
 * The typed client of clients/typescript (openapi-typescript + openapi-fetch, generated from
 * openapi/v1.json) against a live rowi on a loopback socket: what a developer does first.
 */
let test: TestApp;
let rowi: RowiClient;
let baseUrl: string;
beforeAll(async () => {
  test = await startApp();
  baseUrl = await listenOnLoopback(test);
  rowi = createRowiClient({ baseUrl, apiKey: test.adminKey });
});
afterAll(() => test.close());

describe('the TypeScript client (clients/typescript)', () => {
  it('is what openapi/v1.json generates (npm run client rewrites it)', async () => {
    // Not spawnSync: a blocked event loop would make the app under test shed the next requests.
    const checked = await promisify(execFile)(process.execPath, ['clients/typescript/generate.mjs', '--check'], {
      encoding: 'utf8',
    }).catch((error: { stderr: string }) => error);
    expect(checked.stderr).toBe('');
  });

  it('creates a user, an item, sets its stock, places an order and reads it back, all typed', async () => {
    const created = await rowi.POST('/v1/users', { body: { name: 'Typed Client', email: 'typed@example.com' } });
    expect(created.response.status, JSON.stringify(created.error)).toBe(201);
    const user: User = created.data!;
    expect(user).toMatchObject({ name: 'Typed Client', email: 'typed@example.com' });

    const item = (await rowi.POST('/v1/items', { body: { name: 'Typed widget', sku: 'TYPED-1', price: '2.50' } }))
      .data!;
    expect(item.sku).toBe('TYPED-1');

    const stock = await rowi.PUT('/v1/items/{id}/stock', { params: { path: { id: item.id } }, body: { quantity: 10 } });
    expect(stock.response.status).toBe(200);
    expect(stock.data!.quantity).toBe(10);

    const placed = await rowi.POST('/v1/orders', {
      body: { name: 'typed order', user_id: user.id, lines: [{ item_id: item.id, quantity: 3 }] },
    });
    expect(placed.response.status).toBe(201);
    const order: Order = placed.data!;
    expect(order).toMatchObject({
      status: 'placed',
      total: '7.50',
      lines: [{ item_id: item.id, quantity: 3, unit_price: '2.50', line_total: '7.50' }],
    });

    const read = await rowi.GET('/v1/orders/{id}', { params: { path: { id: order.id } } });
    expect(read.data).toEqual(order);
    expect(read.response.headers.get('etag')).toMatch(/^"/);

    // expand= is typed as the paths offered, and the client's repeated parameters are taken.
    const expanded = await rowi.GET('/v1/orders/{id}', {
      params: { path: { id: order.id }, query: { expand: ['user', 'lines.item'] } },
    });
    // A read takes fields=, so its answer is typed with every member but id optional (ExpandedOrderFields).
    expect(expanded.data!.user?.id).toBe(order.user_id);
    expect(expanded.data!.lines?.[0]?.item?.sku).toBe(item.sku);

    const listed = await rowi.GET('/v1/orders', { params: { query: { limit: 10 } } });
    expect(listed.data!.data.map((each) => each.id)).toContain(order.id);
    const some = await rowi.GET('/v1/orders/{id}', {
      params: { path: { id: order.id }, query: { fields: 'total,lines.quantity' } },
    });
    expect(some.data).toEqual({ id: order.id, total: '7.50', lines: [{ quantity: 3 }] });
    const after = await rowi.GET('/v1/items/{id}/stock', { params: { path: { id: item.id } } });
    expect(after.data, JSON.stringify(after.error)).toMatchObject({ quantity: 7, reserved: 3 });
  });

  it('receives a typed problem: 409 email-taken, 422 with errors, 401 for a bad key', async () => {
    await rowi.POST('/v1/users', { body: { name: 'First', email: 'taken@example.com' } });
    const conflict = await rowi.POST('/v1/users', { body: { name: 'Second', email: 'taken@example.com' } });
    expect(conflict.data).toBeUndefined();
    const problem: Problem = conflict.error!;
    expect(conflict.response.status, JSON.stringify(problem)).toBe(409);
    expect(problem).toMatchObject({ status: 409, type: expect.stringMatching(/\/problems\/email-taken$/) });

    const invalid = await rowi.POST('/v1/users', { body: { name: '', email: 'not-an-email' } });
    expect(invalid.error!.status).toBe(422);
    expect(invalid.error!.errors!.map((error) => error.pointer).sort()).toEqual(['#/email', '#/name']);

    const stranger = createRowiClient({ baseUrl, apiKey: 'rowi_not-a-key' });
    const refused = await stranger.GET('/v1/users');
    expect(refused.response.status).toBe(401);
    expect(refused.error!.type).toMatch(/\/problems\/invalid-credentials$/);
  });

  it('runs batches, typed: users created in one request, stock set and adjusted, a 409 naming the failing entry', async () => {
    const batch: UserBatch = {
      create: [
        { name: 'Batch One', email: 'batch1@example.com' },
        { name: 'Batch Two', email: 'batch2@example.com' },
      ],
    };
    const created = await rowi.POST('/v1/users/batch', { body: batch });
    expect(created.response.status, JSON.stringify(created.error)).toBe(200);
    expect(created.data!.create!.map((result) => [result.status, result.record!.email])).toEqual([
      [201, 'batch1@example.com'],
      [201, 'batch2@example.com'],
    ]);

    const item = (await rowi.POST('/v1/items', { body: { name: 'Batched', sku: 'TYPED-B', price: '1' } })).data!;
    const stock = await rowi.POST('/v1/items/stock/batch', { body: { set: [{ item_id: item.id, quantity: 4 }] } });
    const result: StockBatchResult = stock.data!;
    expect(result.set![0]).toMatchObject({ status: 200, etag: '"v2"', record: { quantity: 4 } });

    const short = await rowi.POST('/v1/items/stock/batch', { body: { adjust: [{ item_id: item.id, by: -5 }] } });
    expect(short.response.status).toBe(409);
    expect(short.error!.errors!.map((error) => error.pointer)).toEqual(['#/adjust/0']);
  });

  it('takes an access token instead of a key (POST /oauth/token, client credentials)', async () => {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: 'admin',
      client_secret: test.adminKey,
    });
    const token = (await (await fetch(`${baseUrl}/oauth/token`, { method: 'POST', body: form })).json()) as {
      access_token: string;
    };
    const withToken = createRowiClient({ baseUrl, token: token.access_token });
    expect((await withToken.GET('/v1/users')).response.status).toBe(200);
    expect(() => createRowiClient({ baseUrl })).toThrow(/apiKey or a token/);
  });

  it('importFile uploads a CSV file and waits for its operation to end, typed', async () => {
    const done = await importFile(
      { baseUrl, apiKey: test.adminKey },
      {
        collection: 'items',
        file: new TextEncoder().encode('sku,name,price,quantity\nTC-1,Typed import,3.00,5\n'),
        mediaType: 'text/csv',
        mode: 'partial',
        pollMs: 20,
      },
    );
    expect(done.status).toBe('succeeded');
    expect(done.progress.rows_succeeded).toBe(1);
    const listed = await rowi.GET('/v1/items', { params: { query: { sku: 'TC-1' } } });
    expect(listed.data?.data.map((item) => item.name)).toEqual(['Typed import']);

    const user = await rowi.POST('/v1/users', { body: { name: 'Typed buyer', email: 'typed.buyer@example.com' } });
    const itemId = listed.data!.data[0]!.id;
    const importOrders = () =>
      importFile(
        { baseUrl, apiKey: test.adminKey },
        {
          collection: 'orders',
          file: `${JSON.stringify({ name: 'TC-ORDER', user_id: user.data!.id, lines: [{ item_id: itemId, quantity: 2 }] })}\n`,
          mediaType: 'application/x-ndjson',
          idempotencyKey: 'tc-orders-1',
          pollMs: 20,
        },
      );
    const orders = await importOrders();
    expect(orders).toMatchObject({ target: 'orders', status: 'succeeded', progress: { rows_succeeded: 1 } });
    // Retried with the same key: the same operation, and the order is placed once.
    expect((await importOrders()).id).toBe(orders.id);
    const placed = await rowi.GET('/v1/orders', { params: { query: { user_id: user.data!.id } } });
    expect(placed.data?.data.map((order) => [order.name, order.total])).toEqual([['TC-ORDER', '6.00']]);
  });
});
