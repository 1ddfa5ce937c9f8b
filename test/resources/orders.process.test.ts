import { afterEach, describe, expect, it } from 'vitest';
import type { Movement, Stock } from '../../src/resources/items/stock.schema.js';
import type { ShortLine } from '../../src/resources/orders/order-lines.js';
import type { Order } from '../../src/resources/orders/orders.schema.js';
import { startServer, type RunningServer, type StartOptions } from '../helpers/process.js';

/**
 * Orders and stock under load, over a real socket against the built CLI (`npm test` builds
 * first): concurrent orders never oversell, a SIGKILL loses no acknowledged order and leaves
 * stock, orders and the movement ledger consistent, and one Idempotency-Key places one order.
 */

interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

interface Problem {
  type: string;
  status: number;
  short_lines?: ShortLine[];
}

interface Reply<T> {
  status: number;
  headers: Headers;
  body: T;
}

type Json = <T = unknown>(
  method: string,
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) => Promise<Reply<T>>;

/** JSON over fetch against one server, as its admin caller; paths are relative to /v1. */
function jsonClient(server: RunningServer): Json {
  return async <T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Reply<T>> => {
    const reply = await fetch(`${server.baseUrl}/v1${path}`, {
      method,
      headers: {
        accept: 'application/json',
        'x-api-key': server.adminKey,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await reply.text();
    return { status: reply.status, headers: reply.headers, body: (text === '' ? undefined : JSON.parse(text)) as T };
  };
}

/** Every row of a paged collection (path carries ?limit=...), following next_cursor; bounded in pages. */
async function readAll<T>(json: Json, path: string, maxPages = 100): Promise<T[]> {
  const rows: T[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < maxPages; page++) {
    const reply: Reply<Page<T>> = await json<Page<T>>(
      'GET',
      cursor === null ? path : `${path}&cursor=${encodeURIComponent(cursor)}`,
    );
    expect(reply.status, `GET ${path}`).toBe(200);
    rows.push(...reply.body.data);
    cursor = reply.body.next_cursor;
    if (cursor === null) return rows;
  }
  throw new Error(`GET ${path}: still a next_cursor after ${maxPages} pages`);
}

/** mulberry32: a small seeded PRNG, so a failing run can be repeated with its seed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seedFor(test: string): number {
  const seed =
    process.env.ROWI_TEST_SEED === undefined ? Math.floor(Math.random() * 2 ** 32) : Number(process.env.ROWI_TEST_SEED);
  console.log(`${test}: seed ${seed} (repeat with ROWI_TEST_SEED=${seed})`);
  return seed;
}

/** count distinct values of the list, chosen at random. */
function pickDistinct<T>(random: () => number, values: T[], count: number): T[] {
  const pool = [...values];
  for (let index = 0; index < count; index++) {
    const other = index + Math.floor(random() * (pool.length - index));
    [pool[index], pool[other]] = [pool[other]!, pool[index]!];
  }
  return pool.slice(0, count);
}

/** Runs work over the inputs with at most `limit` in flight; results in input order. */
async function inPool<T, R>(inputs: T[], limit: number, work: (input: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(inputs.length);
  let next = 0;
  const worker = async () => {
    while (next < inputs.length) {
      const index = next++;
      results[index] = await work(inputs[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, inputs.length) }, worker));
  return results;
}

/** One user and `count` items priced `price`, each with `quantity` units on hand. */
async function arrange(
  json: Json,
  count: number,
  quantity: number,
  price: string,
): Promise<{ userId: number; itemIds: number[] }> {
  const user = await json<{ id: number }>('POST', '/users', { name: 'Buyer', email: 'buyer@example.com' });
  expect(user.status).toBe(201);
  const itemIds: number[] = [];
  for (let index = 0; index < count; index++) {
    const item = await json<{ id: number; price: string }>('POST', '/items', {
      name: `Item ${index}`,
      sku: `SKU-${index}`,
      price,
    });
    expect(item.status).toBe(201);
    const stock = await json<Stock>('PUT', `/items/${item.body.id}/stock`, { quantity });
    expect(stock.status).toBe(200);
    expect(stock.body).toMatchObject({ item_id: item.body.id, quantity, reserved: 0 });
    itemIds.push(item.body.id);
  }
  return { userId: user.body.id, itemIds };
}

/**
 * The item's stock and full ledger, with the ledger checked against the stock: newest first,
 * each movement's *_after equal to the running sums (oldest first), and the sums equal to the
 * current quantity and reserved.
 */
async function stockAndLedger(json: Json, itemId: number): Promise<{ stock: Stock; movements: Movement[] }> {
  const stock = await json<Stock>('GET', `/items/${itemId}/stock`);
  expect(stock.status).toBe(200);
  const movements = await readAll<Movement>(json, `/items/${itemId}/stock/movements?limit=500`);
  const ids = movements.map((movement) => movement.id);
  expect(ids, `item ${itemId}: movements newest first`).toEqual([...ids].sort((a, b) => b - a));
  let quantity = 0;
  let reserved = 0;
  for (const movement of [...movements].reverse()) {
    expect(movement.item_id).toBe(itemId);
    quantity += movement.quantity_change;
    reserved += movement.reserved_change;
    expect(
      { id: movement.id, quantity_after: movement.quantity_after, reserved_after: movement.reserved_after },
      `item ${itemId}: running sums of the ledger`,
    ).toEqual({
      id: movement.id,
      quantity_after: quantity,
      reserved_after: reserved,
    });
    expect(movement.quantity_after).toBeGreaterThanOrEqual(0);
    expect(movement.reserved_after).toBeGreaterThanOrEqual(0);
    const shape = { set: [null, 0], reserve: [-1, 1], release: [1, -1], fulfil: [0, -1] }[movement.kind];
    if (movement.kind === 'set') {
      expect(movement.reserved_change).toBe(0);
      expect(movement.order_id).toBeNull();
    } else {
      expect(Math.sign(movement.quantity_change), `${movement.kind} movement ${movement.id}`).toBe(shape[0]);
      expect(Math.sign(movement.reserved_change), `${movement.kind} movement ${movement.id}`).toBe(shape[1]);
      if (movement.kind !== 'fulfil') expect(movement.quantity_change).toBe(-movement.reserved_change);
      expect(movement.order_id).toEqual(expect.any(Number));
    }
  }
  expect(
    { quantity: stock.body.quantity, reserved: stock.body.reserved },
    `item ${itemId}: ledger sums equal the stock`,
  ).toEqual({ quantity, reserved });
  return { stock: stock.body, movements };
}

/** Order ids of the item's movements of one kind, sorted. */
function orderIdsOf(movements: Movement[], kind: Movement['kind']): number[] {
  return movements
    .filter((movement) => movement.kind === kind)
    .map((movement) => movement.order_id!)
    .sort((a, b) => a - b);
}

/** Units of the item over the orders, and the sorted ids of those orders that hold it. */
function unitsOf(orders: Order[], itemId: number): { units: number; orderIds: number[] } {
  let units = 0;
  const orderIds: number[] = [];
  for (const order of orders) {
    const line = order.lines.find((candidate) => candidate.item_id === itemId);
    if (line) {
      units += line.quantity;
      orderIds.push(order.id);
    }
  }
  return { units, orderIds: orderIds.sort((a, b) => a - b) };
}

const byId = (a: { id: number }, b: { id: number }) => a.id - b.id;
const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

/** Servers a test started; whatever is still running afterwards is stopped (SIGKILL after 10 s). */
const running: RunningServer[] = [];
async function serve(options: StartOptions = {}): Promise<RunningServer> {
  const server = await startServer(options);
  running.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(
    running.splice(0).map(async (server) => {
      if (server.child.exitCode !== null || server.child.signalCode !== null) return;
      const stopped = await Promise.race([server.stop('SIGTERM').then(() => true), pause(10_000).then(() => false)]);
      if (!stopped) server.child.kill('SIGKILL');
    }),
  );
});

describe('orders and stock under load, over a real socket', () => {
  it(
    'POST /v1/orders: under 300 concurrent orders against 100 units spread over 20 items, exactly the orders answered 201 hold stock and nothing is oversold',
    { timeout: 40_000 },
    async () => {
      const STOCK = 5;
      const server = await serve();
      const json = jsonClient(server);
      const { userId, itemIds } = await arrange(json, 20, STOCK, '2.50');
      const random = prng(seedFor('300 concurrent orders'));
      const requests = Array.from({ length: 300 }, (_, index) => ({
        name: `SO-${index}`,
        user_id: userId,
        lines: pickDistinct(random, itemIds, 2 + Math.floor(random() * 3)).map((itemId) => ({
          item_id: itemId,
          quantity: 1,
        })),
      }));

      const replies = await inPool(requests, 64, (request) => json<Order | Problem>('POST', '/orders', request));

      // Every request is placed or refused as a whole for lack of stock; nothing else.
      const unexpected = replies
        .map((reply, index) => ({ index, status: reply.status, body: reply.body }))
        .filter((reply) => reply.status !== 201 && reply.status !== 409);
      expect(unexpected).toEqual([]);
      const placed: Order[] = [];
      replies.forEach((reply, index) => {
        const request = requests[index]!;
        if (reply.status === 201) {
          const order = reply.body as Order;
          expect(reply.headers.get('location')).toBe(`/v1/orders/${order.id}`);
          expect(order).toMatchObject({
            name: request.name,
            user_id: userId,
            status: 'placed',
            total: (2.5 * request.lines.length).toFixed(2),
          });
          expect(order.lines).toEqual(
            request.lines.map((line) => ({ ...line, unit_price: '2.50', line_total: '2.50' })),
          );
          placed.push(order);
        } else {
          const problem = reply.body as Problem;
          expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
          expect(problem).toMatchObject({ type: '/problems/insufficient-stock', status: 409 });
          expect(problem.short_lines?.length, `409 for ${JSON.stringify(request)}`).toBeGreaterThan(0);
          for (const short of problem.short_lines ?? []) {
            expect(request.lines.map((line) => line.item_id)).toContain(short.item_id);
            expect(short.requested).toBe(1);
            expect(short.available).toBeLessThan(short.requested);
          }
        }
      });
      const refused = replies.filter((reply) => reply.status === 409);
      expect(placed.length).toBeGreaterThan(0);
      expect(refused.length).toBeGreaterThan(0);

      // The orders stored are exactly those answered 201, as they were answered.
      const stored = (await readAll<Order>(json, '/orders?limit=500')).sort(byId);
      expect(stored).toEqual([...placed].sort(byId));

      for (const itemId of itemIds) {
        const { stock, movements } = await stockAndLedger(json, itemId);
        const held = unitsOf(placed, itemId);
        expect(stock.quantity, `item ${itemId}`).toBeGreaterThanOrEqual(0);
        expect({ item: itemId, reserved: stock.reserved, onHand: stock.quantity + stock.reserved }).toEqual({
          item: itemId,
          reserved: held.units,
          onHand: STOCK,
        });
        expect(
          orderIdsOf(movements, 'reserve'),
          `item ${itemId}: reserve movements are the placed orders holding it`,
        ).toEqual(held.orderIds);
        expect(
          movements
            .filter((movement) => movement.kind === 'reserve')
            .every((movement) => movement.quantity_change === -1 && movement.reserved_change === 1),
        ).toBe(true);
        expect(orderIdsOf(movements, 'release')).toEqual([]);
        expect(orderIdsOf(movements, 'fulfil')).toEqual([]);
        expect(movements.filter((movement) => movement.kind === 'set')).toHaveLength(1);
      }
      // Stock only went down while the orders came in: an item reported short is now sold out.
      for (const reply of refused) {
        for (const short of (reply.body as Problem).short_lines ?? []) {
          const stock = await json<Stock>('GET', `/items/${short.item_id}/stock`);
          expect(stock.body.quantity, `item ${short.item_id} was reported short`).toBe(0);
        }
      }

      // Fulfil about a third of the placed orders and cancel another third, concurrently.
      const outcomes = new Map<number, 'fulfilled' | 'cancelled' | 'placed'>();
      for (const order of placed) {
        const draw = random();
        outcomes.set(order.id, draw < 1 / 3 ? 'fulfilled' : draw < 2 / 3 ? 'cancelled' : 'placed');
      }
      const changes = placed.filter((order) => outcomes.get(order.id) !== 'placed');
      const patched = await inPool(changes, 32, (order) =>
        json<Order>(
          'PATCH',
          `/orders/${order.id}`,
          { status: outcomes.get(order.id) },
          { 'content-type': 'application/merge-patch+json' },
        ),
      );
      patched.forEach((reply, index) => {
        const order = changes[index]!;
        expect({ id: order.id, status: reply.status, order: reply.body.status }).toEqual({
          id: order.id,
          status: 200,
          order: outcomes.get(order.id),
        });
        expect(reply.body.lines).toEqual(order.lines);
      });

      const after = (await readAll<Order>(json, '/orders?limit=500')).sort(byId);
      expect(after.map((order) => ({ id: order.id, status: order.status }))).toEqual(
        [...placed].sort(byId).map((order) => ({ id: order.id, status: outcomes.get(order.id) })),
      );
      for (const itemId of itemIds) {
        const { stock, movements } = await stockAndLedger(json, itemId);
        const fulfilled = movements
          .filter((movement) => movement.kind === 'fulfil')
          .reduce((sum, movement) => sum - movement.reserved_change, 0);
        const stillPlaced = unitsOf(
          after.filter((order) => order.status === 'placed'),
          itemId,
        );
        const gone = unitsOf(
          after.filter((order) => order.status === 'fulfilled'),
          itemId,
        );
        const returned = unitsOf(
          after.filter((order) => order.status === 'cancelled'),
          itemId,
        );
        expect(stock.quantity).toBeGreaterThanOrEqual(0);
        expect({
          item: itemId,
          total: stock.quantity + stock.reserved + fulfilled,
          reserved: stock.reserved,
          fulfilled,
        }).toEqual({
          item: itemId,
          total: STOCK,
          reserved: stillPlaced.units,
          fulfilled: gone.units,
        });
        expect(orderIdsOf(movements, 'fulfil'), `item ${itemId}: fulfil movements`).toEqual(gone.orderIds);
        expect(orderIdsOf(movements, 'release'), `item ${itemId}: release movements`).toEqual(returned.orderIds);
        expect(
          movements
            .filter((movement) => movement.kind === 'fulfil')
            .every((movement) => movement.quantity_change === 0),
        ).toBe(true);
      }
    },
  );

  it(
    'POST /v1/orders: after SIGKILL in the middle of a stream of orders, every order answered 201 is there with its lines and the stock invariant holds on restart',
    { timeout: 40_000 },
    async () => {
      const STOCK = 1000;
      const WRITERS = 4;
      const first = await serve();
      let json = jsonClient(first);
      const { userId, itemIds } = await arrange(json, 10, STOCK, '1.25');
      const random = prng(seedFor('SIGKILL during orders'));

      const acknowledged: Order[] = [];
      const unexpected: { status: number; body: unknown }[] = [];
      let sent = 0;
      let killed = false;
      // WRITERS writers post one order after another, at most 2000 requests in all, until the server is gone.
      const writer = async () => {
        while (sent < 2000) {
          const index = sent++;
          const lines = pickDistinct(random, itemIds, 1 + Math.floor(random() * 3)).map((itemId) => ({
            item_id: itemId,
            quantity: 1 + Math.floor(random() * 3),
          }));
          let reply: Reply<Order>;
          try {
            reply = await json<Order>('POST', '/orders', { name: `SO-${index}`, user_id: userId, lines });
          } catch {
            return; // the connection was refused or cut: the server is gone
          }
          if (reply.status === 201) {
            expect(reply.body.lines.map((line) => ({ item_id: line.item_id, quantity: line.quantity }))).toEqual(lines);
            acknowledged.push(reply.body);
          } else {
            unexpected.push({ status: reply.status, body: reply.body });
          }
          if (!killed && acknowledged.length >= 100) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        }
      };
      await Promise.all(Array.from({ length: WRITERS }, writer));
      await first.exited;

      expect(killed).toBe(true);
      expect(unexpected).toEqual([]);
      expect(acknowledged.length).toBeGreaterThanOrEqual(100);

      // The same data file, as the crash left it: the server starts without any repair; the first start's admin key still holds.
      const second = await serve({ database: first.database, adminKey: first.adminKey });
      json = jsonClient(second);
      for (const order of acknowledged) {
        const read = await json<Order>('GET', `/orders/${order.id}`);
        expect({ status: read.status, body: read.body }, `order ${order.id} was answered 201`).toEqual({
          status: 200,
          body: order,
        });
      }
      // Besides those, at most the orders in flight at the kill (one per writer) may have been stored.
      const stored = (await readAll<Order>(json, '/orders?limit=500')).sort(byId);
      const storedIds = stored.map((order) => order.id);
      expect(storedIds).toEqual(expect.arrayContaining(acknowledged.map((order) => order.id)));
      expect(stored.length - acknowledged.length).toBeLessThanOrEqual(WRITERS);
      expect(stored.every((order) => order.status === 'placed' && order.lines.length > 0)).toBe(true);

      for (const itemId of itemIds) {
        const { stock, movements } = await stockAndLedger(json, itemId);
        const held = unitsOf(stored, itemId);
        expect({ item: itemId, onHand: stock.quantity + stock.reserved, reserved: stock.reserved }).toEqual({
          item: itemId,
          onHand: STOCK,
          reserved: held.units,
        });
        expect(
          orderIdsOf(movements, 'reserve'),
          `item ${itemId}: reserve movements are the stored orders holding it`,
        ).toEqual(held.orderIds);
      }

      // And it takes new orders.
      const after = await json<Order>('POST', '/orders', {
        name: 'after restart',
        user_id: userId,
        lines: [{ item_id: itemIds[0]!, quantity: 1 }],
      });
      expect(after.status).toBe(201);
      expect(after.body.id).toBeGreaterThan(Math.max(...storedIds));
    },
  );

  it(
    'POST /v1/orders: 50 simultaneous requests with one Idempotency-Key and one body create exactly one order and all get the same response',
    { timeout: 30_000 },
    async () => {
      const server = await serve();
      const json = jsonClient(server);
      const { userId, itemIds } = await arrange(json, 2, 10, '3.00');
      const body = {
        name: 'once',
        user_id: userId,
        lines: [
          { item_id: itemIds[0]!, quantity: 2 },
          { item_id: itemIds[1]!, quantity: 3 },
        ],
      };

      const replies = await Promise.all(
        Array.from({ length: 50 }, () =>
          json<Order>('POST', '/orders', body, { 'idempotency-key': 'one-key-for-fifty' }),
        ),
      );

      expect(replies.map((reply) => reply.status)).toEqual(Array.from({ length: 50 }, () => 201));
      const order = replies[0]!.body;
      expect(order).toMatchObject({ name: 'once', user_id: userId, status: 'placed', total: '15.00' });
      for (const reply of replies) {
        expect(reply.body).toEqual(order);
        expect(reply.headers.get('location')).toBe(`/v1/orders/${order.id}`);
      }
      expect(replies.filter((reply) => reply.headers.get('idempotent-replayed') === 'true')).toHaveLength(49);
      expect(replies.filter((reply) => reply.headers.get('idempotent-replayed') === null)).toHaveLength(1);

      expect(await readAll<Order>(json, '/orders?limit=500')).toEqual([order]);
      for (const [index, units] of [2, 3].entries()) {
        const { stock, movements } = await stockAndLedger(json, itemIds[index]!);
        expect({ quantity: stock.quantity, reserved: stock.reserved }).toEqual({
          quantity: 10 - units,
          reserved: units,
        });
        expect(orderIdsOf(movements, 'reserve')).toEqual([order.id]);
      }
    },
  );
});

/**
 * Several processes, one database (docs/deployment.md), on the run's backend: two `rowi serve` processes on
 * different ports, and one `rowi serve --workers 2` whose workers share a port.
 */
describe.each([
  { name: 'two instances on different ports', start: async () => twoInstances() },
  { name: 'rowi serve --workers 2 (one port)', start: async () => oneServerTwoWorkers() },
])('$name, one database', ({ start }) => {
  it(
    'POST /v1/orders: 240 concurrent orders spread over the processes against 60 units never oversell; the orders stored are those answered 201 and the ledger matches',
    { timeout: 40_000 },
    async () => {
      const STOCK = 3;
      const [a, b] = await start();
      const clients = [jsonClient(a), jsonClient(b)];
      const { userId, itemIds } = await arrange(clients[0]!, 20, STOCK, '1.00');
      const random = prng(seedFor('orders over two processes'));
      const requests = Array.from({ length: 240 }, (_, index) => ({
        name: `SO-${index}`,
        user_id: userId,
        lines: pickDistinct(random, itemIds, 1 + Math.floor(random() * 3)).map((itemId) => ({
          item_id: itemId,
          quantity: 1,
        })),
      }));
      const replies = await inPool(requests, 64, (request, index) =>
        clients[index % 2]!<Order | Problem>('POST', '/orders', request),
      );

      expect(replies.map((reply) => reply.status).filter((status) => status !== 201 && status !== 409)).toEqual([]);
      const placed = replies.filter((reply) => reply.status === 201).map((reply) => reply.body as Order);
      expect(placed.length).toBeGreaterThan(0);
      expect(placed.length).toBeLessThan(requests.length);
      const stored = (await readAll<Order>(clients[1]!, '/orders?limit=500')).sort(byId);
      expect(stored).toEqual([...placed].sort(byId));
      for (const itemId of itemIds) {
        const { stock, movements } = await stockAndLedger(clients[itemId % 2]!, itemId);
        const held = unitsOf(placed, itemId);
        expect({ item: itemId, reserved: stock.reserved, onHand: stock.quantity + stock.reserved }).toEqual({
          item: itemId,
          reserved: held.units,
          onHand: STOCK,
        });
        expect(orderIdsOf(movements, 'reserve')).toEqual(held.orderIds);
      }
    },
  );

  it(
    'POST /v1/orders: one Idempotency-Key sent 40 times at once, half to each process, places exactly one order; every reply is that order',
    { timeout: 30_000 },
    async () => {
      const [a, b] = await start();
      const clients = [jsonClient(a), jsonClient(b)];
      const { userId, itemIds } = await arrange(clients[0]!, 1, 10, '2.00');
      const body = { name: 'once', user_id: userId, lines: [{ item_id: itemIds[0]!, quantity: 4 }] };
      const replies = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          clients[index % 2]!<Order>('POST', '/orders', body, { 'idempotency-key': 'shared-by-two' }),
        ),
      );
      expect(replies.map((reply) => reply.status)).toEqual(Array.from({ length: 40 }, () => 201));
      const order = replies[0]!.body;
      for (const reply of replies) expect(reply.body).toEqual(order);
      expect(replies.filter((reply) => reply.headers.get('idempotent-replayed') === null)).toHaveLength(1);
      expect(await readAll<Order>(clients[1]!, '/orders?limit=500')).toEqual([order]);
      const stock = await clients[1]!<Stock>('GET', `/items/${itemIds[0]}/stock`);
      expect({ quantity: stock.body.quantity, reserved: stock.body.reserved }).toEqual({ quantity: 6, reserved: 4 });
    },
  );

  it(
    'a key revoked through one process is refused by every process within 1 s; a role narrowed through one is enforced by all',
    { timeout: 30_000 },
    async () => {
      const [a, b] = await start();
      const adminA = jsonClient(a);
      const caller = await adminA<{ id: number }>('POST', '/callers', { name: 'sales', role: 'editor' });
      expect(caller.status).toBe(201);
      const key = await adminA<{ id: number; key: string }>('POST', `/callers/${caller.body.id}/keys`, {});
      expect(key.status).toBe(201);
      const asSales = (server: RunningServer) => jsonClient({ ...server, adminKey: key.body.key });
      // Both processes have checked the key and believe it (each several times: workers take turns).
      let sequence = 0;
      for (let round = 0; round < 4; round++) {
        for (const server of [a, b])
          expect(
            (await asSales(server)('POST', '/users', { name: 'Sales', email: `sales${sequence++}@example.com` }))
              .status,
          ).toBe(201);
      }
      // Narrow the role through A: B (and every worker) stops allowing creation.
      const etag = (await adminA('GET', `/callers/${caller.body.id}`)).headers.get('etag')!;
      expect(
        (
          await adminA(
            'PATCH',
            `/callers/${caller.body.id}`,
            { role: 'reader' },
            { 'content-type': 'application/merge-patch+json', 'if-match': etag },
          )
        ).status,
      ).toBe(200);
      expect(
        await within(
          1000,
          async () =>
            (await asSales(b)('POST', '/users', { name: 'No', email: `no${Date.now()}@example.com` })).status === 403,
        ),
      ).toBe(true);
      expect((await asSales(b)('GET', '/users')).status).toBe(200);

      // Revoke through A: refused everywhere within 1 s.
      const revokedAt = Date.now();
      expect((await adminA('DELETE', `/callers/${caller.body.id}/keys/${key.body.id}`)).status).toBe(204);
      expect(await within(1000, async () => (await asSales(b)('GET', '/users')).status === 401)).toBe(true);
      expect(Date.now() - revokedAt).toBeLessThan(1000);
      for (let index = 0; index < 10; index++) {
        for (const server of [a, b]) expect((await asSales(server)('GET', '/users')).status).toBe(401);
      }
    },
  );
});

/** Polls `check` until it is true or `ms` have passed. */
async function within(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + ms;
  do {
    if (await check()) return true;
    await pause(20);
  } while (Date.now() < deadline);
  return false;
}

async function twoInstances(): Promise<[RunningServer, RunningServer]> {
  const a = await serve();
  const b = await serve({ database: a.database, adminKey: a.adminKey });
  return [a, b];
}

/** The same server twice: requests to it are spread over its two workers by the primary. */
async function oneServerTwoWorkers(): Promise<[RunningServer, RunningServer]> {
  const server = await serve({ env: { ROWI_WORKERS: '2' } });
  return [server, server];
}
