import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';

/**
 * Record ownership (docs/access.md), as a generated matrix: every operation on one record of every
 * owned resource × {the caller's own record, another caller's record, a record of the user the
 * token acts for, another user's record, a deleted record} × {a caller that sees all records, one
 * that sees only its own, a token of that one acting for a user}. Each cell asserts the status,
 * the body (the record, or the very 404 a record that does not exist gets) and, at the end, that
 * nothing stored changed. The writes change nothing when they are allowed (the same values again,
 * or a stale If-Match), so the data is made once for the whole matrix; the same file runs on
 * SQLite and on PostgreSQL (the fast-postgres project).
 */
const RESOURCES = ['users', 'items', 'orders'] as const;
type Resource = (typeof RESOURCES)[number];
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Caller = 'warehouse' | 'shop' | 'market';
type Viewer = 'warehouse' | 'shop' | 'acting';
type Whose = 'own' | 'other' | 'user' | 'otherUser' | 'deleted';

let test: TestApp;
/** The callers: warehouse sees all; shop and market see only their own records of every resource. */
const keys: Record<Caller, string> = { warehouse: '', shop: '', market: '' };
const callerIds: Record<Caller, number> = { warehouse: 0, shop: 0, market: 0 };
/** A token of the shop acting for Ada, a user the shop created; the warehouse placed Ada's order. */
let actingToken = '';
/** The order the warehouse placed for Ada, on the shop's item. */
let adaOrderId = 0;
/**
 * By resource: the shop's record, the market's, Ada's (the user the token acts for; items belong
 * to no user), one of another user (the warehouse's customer Walt), and one the shop made and the
 * admin deleted.
 */
const records = {} as Record<Resource, Partial<Record<Whose, Row>>>;
/** Who created each kind of record. */
const OWNER: Record<Resource, Record<Exclude<Whose, 'deleted'>, Caller>> = {
  users: { own: 'shop', other: 'market', user: 'shop', otherUser: 'warehouse' },
  items: { own: 'shop', other: 'market', user: 'shop', otherUser: 'warehouse' },
  orders: { own: 'shop', other: 'market', user: 'shop', otherUser: 'warehouse' },
};
let storedBefore: unknown;

async function makeCaller(name: Caller, access: 'all' | 'own') {
  const created = await test.call({
    method: 'POST',
    url: '/v1/callers',
    body: {
      name,
      role: 'editor',
      extra_scopes: ['users:delete', 'items:delete', 'orders:delete', 'users:act'],
      record_access: { users: access, items: access, orders: access },
    },
  });
  expect(created.status).toBe(201);
  const key = await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} });
  keys[name] = key.json.key;
  callerIds[name] = created.json.id;
}

async function make(key: string, url: string, body: unknown): Promise<Row> {
  const reply = await test.call({ method: 'POST', url, body, key });
  expect(reply.status, JSON.stringify(reply.json)).toBe(201);
  return reply.json;
}

/** One caller's user, item (with stock) and order on them. */
async function makeSet(owner: Caller, tag: string) {
  const key = keys[owner];
  const user = await make(key, '/v1/users', { name: `${owner} customer`, email: `${tag}@example.com` });
  const item = await make(key, '/v1/items', { name: `${owner} item`, sku: `SKU-${tag}`, price: '1.50' });
  await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 100 } });
  const order = await make(key, '/v1/orders', {
    name: `${tag}-order`,
    user_id: user.id,
    lines: [{ item_id: item.id, quantity: 2 }],
  });
  return { users: user, items: item, orders: order };
}

async function storedState() {
  const db = test.storage.db;
  return {
    users: await db.selectFrom('users').selectAll().orderBy('id').execute(),
    items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
    orders: await db.selectFrom('orders').selectAll().orderBy('id').execute(),
    stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
    movements: await db.selectFrom('stock_movements').select('id').execute(),
  };
}

/** The credentials of a viewer, beside the request's own headers. */
function as(viewer: Viewer, headers: Record<string, string> = {}): { key?: string; headers: Record<string, string> } {
  return viewer === 'acting'
    ? { headers: { ...headers, authorization: `Bearer ${actingToken}` } }
    : { key: keys[viewer], headers };
}

beforeAll(async () => {
  // Load shedding has its own tests; on a busy machine its 503s would only hide these answers.
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  await makeCaller('warehouse', 'all');
  await makeCaller('shop', 'own');
  await makeCaller('market', 'own');
  const own = await makeSet('shop', 'shop');
  const other = await makeSet('market', 'market');
  const walt = await makeSet('warehouse', 'walt');
  const gone = await makeSet('shop', 'gone');
  const ada = await make(keys.shop, '/v1/users', { name: 'Ada', email: 'ada@example.com' });
  const adaOrder = await make(keys.warehouse, '/v1/orders', {
    name: 'ada-order',
    user_id: ada.id,
    lines: [{ item_id: own.items.id, quantity: 1 }],
  });
  // Ada's order as the shop placed it, on an item of its own (the own item's movements are asserted below).
  const shopItem = await make(keys.shop, '/v1/items', { name: 'shop item 2', sku: 'SKU-shop-2', price: '1.00' });
  await test.call({ method: 'PUT', url: `/v1/items/${shopItem.id}/stock`, body: { quantity: 100 } });
  const adaShopOrder = await make(keys.shop, '/v1/orders', {
    name: 'ada-shop-order',
    user_id: ada.id,
    lines: [{ item_id: shopItem.id, quantity: 1 }],
  });
  actingToken = await issueToken(test, { name: 'shop' }, keys.shop, { user_id: String(ada.id) });
  const deletedStatus: Record<string, number> = {};
  for (const resource of ['orders', 'items', 'users'] as const)
    deletedStatus[resource] = (
      await test.call({ method: 'DELETE', url: `/v1/${resource}/${gone[resource].id}` })
    ).status;
  expect(deletedStatus).toEqual({ orders: 204, items: 204, users: 204 });
  for (const resource of RESOURCES)
    records[resource] = {
      own: own[resource],
      other: other[resource],
      otherUser: walt[resource],
      deleted: gone[resource],
    };
  records.users.user = ada;
  records.orders.user = adaShopOrder;
  adaOrderId = adaOrder.id;
  storedBefore = await storedState();
});
afterAll(() => test.close());

/**
 * Whether the viewer sees the record (docs/access.md): a token acting for a user sees that user's
 * record and orders only, and items as its caller does; a caller its own records or all of them.
 */
function sees(viewer: Viewer, resource: Resource, whose: Whose): boolean {
  if (whose === 'deleted') return false;
  // Acting narrows: of what its caller sees, only the user's record and orders.
  if (viewer === 'acting' && resource !== 'items') return whose === 'user' && OWNER[resource][whose] === 'shop';
  return viewer === 'warehouse' || OWNER[resource][whose] === 'shop';
}

/** The same values again: an allowed write that changes nothing. */
function sameBody(resource: Resource, record: Row): Row {
  if (resource === 'users') return { name: record.name, email: record.email };
  if (resource === 'items') return { name: record.name, sku: record.sku, price: record.price };
  return {
    name: record.name,
    user_id: record.user_id,
    lines: record.lines.map((line: Row) => ({ item_id: line.item_id, quantity: line.quantity })),
  };
}

interface Operation {
  name: string;
  request: (
    resource: Resource,
    record: Row,
  ) => { method: 'GET' | 'PUT' | 'PATCH' | 'DELETE'; headers?: Record<string, string>; body?: unknown };
  /** The status when the caller sees the record. */
  visible: number;
}

const STALE = '"v999"';
const OPERATIONS: Operation[] = [
  { name: 'GET', request: () => ({ method: 'GET' }), visible: 200 },
  {
    name: 'GET with If-None-Match',
    request: () => ({ method: 'GET', headers: { 'if-none-match': '"v1", "v2", "v3"' } }),
    visible: 304,
  },
  { name: 'PUT', request: (resource, record) => ({ method: 'PUT', body: sameBody(resource, record) }), visible: 200 },
  { name: 'PATCH', request: (_resource, record) => ({ method: 'PATCH', body: { name: record.name } }), visible: 200 },
  {
    name: 'PUT with a stale If-Match',
    request: (resource, record) => ({
      method: 'PUT',
      headers: { 'if-match': STALE },
      body: sameBody(resource, record),
    }),
    visible: 412,
  },
  {
    name: 'PATCH with a stale If-Match',
    request: (_resource, record) => ({ method: 'PATCH', headers: { 'if-match': STALE }, body: { name: record.name } }),
    visible: 412,
  },
  {
    name: 'DELETE with a stale If-Match',
    request: () => ({ method: 'DELETE', headers: { 'if-match': STALE } }),
    visible: 412,
  },
];

const VIEWERS: Viewer[] = ['warehouse', 'shop', 'acting'];
const WHOSE: Whose[] = ['own', 'other', 'user', 'otherUser', 'deleted'];
const CASES = RESOURCES.flatMap((resource) =>
  OPERATIONS.flatMap((operation) =>
    VIEWERS.flatMap((viewer) =>
      // Items belong to no user: an item has no cell for the user the token acts for.
      WHOSE.filter((whose) => !(resource === 'items' && whose === 'user')).map((whose) => ({
        resource,
        operation,
        viewer,
        whose,
      })),
    ),
  ),
);

const singular = (resource: Resource) => resource.slice(0, -1);

describe('record ownership: every operation × whose record × what the caller sees', () => {
  it.each(CASES)(
    '$operation.name /v1/$resource/{id}: as the rules say when the record is $whose and the caller is $viewer',
    async ({ resource, operation, viewer, whose }) => {
      const record = records[resource][whose]!;
      const request = operation.request(resource, record);
      const reply = await test.call({
        ...request,
        url: `/v1/${resource}/${record.id}`,
        ...as(viewer, request.headers),
      });
      if (!sees(viewer, resource, whose)) {
        // The same answer as an id that never existed.
        const never = await test.call({ ...request, url: `/v1/${resource}/987654321`, ...as(viewer, request.headers) });
        expect(reply.status).toBe(404);
        expect(reply.json.type).toBe(never.json.type);
        expect(reply.json.detail).toBe(never.json.detail.replace('987654321', String(record.id)));
        expect(reply.json.detail).toBe(`There is no ${singular(resource)} ${record.id}.`);
        return;
      }
      expect(reply.status, JSON.stringify(reply.json)).toBe(operation.visible);
      if (reply.status === 200) expect(reply.json).toEqual(record);
    },
  );

  it('PUT, PATCH, DELETE /v1/{resource}/{id}: nothing stored changed after the whole matrix', async () => {
    expect(await storedState()).toEqual(storedBefore);
  });
});

describe('lists: a caller that sees its own records lists only them, on every page', () => {
  it.each(
    RESOURCES.flatMap((resource) =>
      (['warehouse', 'shop', 'market', 'acting'] as const).map((viewer) => ({ resource, viewer })),
    ),
  )(
    'GET /v1/$resource: one page at a time, sorted newest first, only what $viewer may see',
    async ({ resource, viewer }) => {
      const credentials = viewer === 'market' ? { key: keys.market } : as(viewer);
      const ids: number[] = [];
      let url: string | undefined = `/v1/${resource}?limit=1&sort=-created_at`;
      for (let page = 0; url !== undefined && page < 20; page++) {
        const reply = await test.call({ url, ...credentials });
        expect(reply.status).toBe(200);
        ids.push(...reply.json.data.map((row: Row) => row.id));
        url =
          reply.json.next_cursor === null
            ? undefined
            : `/v1/${resource}?limit=1&sort=-created_at&cursor=${encodeURIComponent(reply.json.next_cursor)}`;
      }
      const all = (await test.call({ url: `/v1/${resource}?limit=500` })).json.data as Row[];
      const ada = records.users.user!.id;
      const shown = (row: Row) => {
        if (viewer === 'warehouse') return true;
        if (viewer === 'acting' && resource === 'users') return row.id === ada;
        if (viewer === 'acting' && resource === 'orders')
          return row.user_id === ada && row.created_by === callerIds.shop;
        return row.created_by === callerIds[viewer === 'acting' ? 'shop' : viewer];
      };
      const expected = all
        .filter(shown)
        .sort((a, b) => (a.created_at === b.created_at ? a.id - b.id : a.created_at < b.created_at ? 1 : -1))
        .map((row) => row.id);
      expect(ids).toEqual(expected);
      expect(ids.length).toBeGreaterThan(0);
    },
  );

  it("GET /v1/orders?created_by=: the market's orders to a caller that sees all, none to the shop", async () => {
    const url = `/v1/orders?created_by=${callerIds.market}`;
    const warehouse = await test.call({ url, key: keys.warehouse });
    expect(warehouse.json.data.map((row: Row) => row.id)).toEqual([records.orders.other!.id]);
    const shop = await test.call({ url, key: keys.shop });
    expect(shop.json).toEqual({ data: [], next_cursor: null });
  });
});

describe('what a record refers to', () => {
  it("POST /v1/orders: 422 unknown-reference, as for a user that does not exist, when the user is another caller's", async () => {
    const body = (userId: number) => ({
      name: 'x',
      user_id: userId,
      lines: [{ item_id: records.items.own!.id, quantity: 1 }],
    });
    const other = await test.call({
      method: 'POST',
      url: '/v1/orders',
      key: keys.shop,
      body: body(records.users.other!.id),
    });
    const never = await test.call({ method: 'POST', url: '/v1/orders', key: keys.shop, body: body(987654321) });
    expect(other.status).toBe(422);
    expect(other.json.type).toBe(never.json.type);
    expect(other.json.errors).toEqual(
      never.json.errors.map((error: Row) => ({
        ...error,
        detail: error.detail.replace('987654321', String(records.users.other!.id)),
      })),
    );
    expect(await storedState()).toEqual(storedBefore);
  });

  it("GET /v1/items/{id}/stock/movements: another caller's order id is null to a caller that sees only its own orders", async () => {
    // The warehouse orders the shop's item for the market's customer: the shop's item, not the shop's order.
    const order = await make(keys.warehouse, '/v1/orders', {
      name: 'warehouse-order',
      user_id: records.users.other!.id,
      lines: [{ item_id: records.items.own!.id, quantity: 1 }],
    });
    const asShop = await test.call({ url: `/v1/items/${records.items.own!.id}/stock/movements`, key: keys.shop });
    const asWarehouse = await test.call({
      url: `/v1/items/${records.items.own!.id}/stock/movements`,
      key: keys.warehouse,
    });
    const asActing = await test.call({ url: `/v1/items/${records.items.own!.id}/stock/movements`, ...as('acting') });
    // Newest first: the warehouse's reservation, Ada's, the shop's, and the admin's count (no order).
    const ada = adaOrderId;
    expect(asWarehouse.json.data.map((row: Row) => row.order_id)).toEqual([
      order.id,
      ada,
      records.orders.own!.id,
      null,
    ]);
    expect(asShop.json.data.map((row: Row) => row.order_id)).toEqual([null, null, records.orders.own!.id, null]);
    // Ada's order was placed by the warehouse: the shop does not see it, so neither does its token acting for Ada.
    expect(asActing.json.data.map((row: Row) => row.order_id)).toEqual([null, null, null, null]);
    const filtered = await test.call({
      url: `/v1/items/${records.items.own!.id}/stock/movements?order_id=${order.id}`,
      key: keys.shop,
    });
    expect(filtered.json).toEqual({ data: [], next_cursor: null });
    await test.call({ method: 'DELETE', url: `/v1/orders/${order.id}` });
  });

  it('GET /v1/items/{id}/stock/movements: a caller that sees all knows every order id', async () => {
    const asWarehouse = await test.call({
      url: `/v1/items/${records.items.own!.id}/stock/movements`,
      key: keys.warehouse,
    });
    expect(asWarehouse.json.data.every((row: Row) => row.kind === 'set' || typeof row.order_id === 'number')).toBe(
      true,
    );
  });
});

describe('events: each viewer gets the events of the records it sees, and only those', () => {
  /**
   * Whose record an event tells of, from the events themselves as a caller that sees all reads
   * them: the record in its data, or (for a deletion, whose data is the id) the record as its
   * creation told it.
   */
  function ownersOf(events: Row[]): Map<string, { created_by: number | null; user: number | null }> {
    const byPath = new Map<string, { created_by: number | null; user: number | null }>();
    for (const event of [...events].reverse()) {
      if (!/^(users|items|orders)$/.test(event.path.split('/')[2])) continue;
      if (!event.type.endsWith('.deleted'))
        byPath.set(event.path, {
          created_by: event.data.created_by,
          user: event.type.startsWith('user.') ? event.data.id : (event.data.user_id ?? null),
        });
    }
    return byPath;
  }

  it.each(['warehouse', 'shop', 'market', 'acting'] as const)(
    'GET /v1/events: every page of $viewer holds exactly the events of the records it sees',
    async (viewer) => {
      const credentials = viewer === 'market' ? { key: keys.market } : as(viewer);
      const all = (await test.call({ url: '/v1/events?limit=500' })).json.data as Row[];
      const owners = ownersOf(all);
      const callerId = callerIds[viewer === 'acting' ? 'shop' : viewer];
      const ada = records.users.user!.id;
      const shown = (event: Row) => {
        const resource = event.path.split('/')[2];
        if (resource === 'items' && event.type.startsWith('stock.')) return viewer === 'warehouse';
        if (!/^(users|items|orders)$/.test(resource)) return false;
        if (viewer === 'warehouse') return true;
        const owner = owners.get(event.path)!;
        if (viewer === 'acting' && resource !== 'items') return owner.user === ada && owner.created_by === callerId;
        return owner.created_by === callerId;
      };
      const expected = all.filter(shown).map((event) => event.id);
      const ids: string[] = [];
      let url: string | undefined = '/v1/events?limit=7';
      for (let page = 0; url !== undefined && page < 50; page++) {
        const reply = await test.call({ url, ...credentials });
        expect(reply.status).toBe(200);
        ids.push(...reply.json.data.map((event: Row) => event.id));
        url =
          reply.json.next_cursor === null
            ? undefined
            : `/v1/events?limit=7&cursor=${encodeURIComponent(reply.json.next_cursor)}`;
      }
      expect(ids).toEqual(expected);
      expect(ids.some((id) => all.find((event) => event.id === id)!.type === 'order.created')).toBe(true);
      // One it may not see is 404, as an event that does not exist.
      const hidden = all.find((event) => !shown(event));
      if (hidden) expect((await test.call({ url: `/v1/events/${hidden.id}`, ...credentials })).status).toBe(404);
    },
  );
});
