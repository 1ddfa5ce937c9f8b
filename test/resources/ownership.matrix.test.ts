import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import {
  expectedIds,
  makeWorld,
  RESOURCES,
  type Named,
  type Resource,
  type Row,
  type Viewer,
  type ViewerName,
  type World,
} from '../helpers/ownership.js';

/**
 * Record ownership (docs/access.md), as a generated matrix over every path that reads or writes one
 * record or a list of them: a single request (read, conditional read, replace, change, delete, the
 * conditions of each; an item's stock; an order's cancel), an atomic batch's entries, `?id=`, a
 * list and its exports (NDJSON and CSV), `expand` (an order's user and items, a movement's order),
 * and what an order may name. Each × every record of the world (test/helpers/ownership.ts: the
 * viewer's own, another caller's, the acting user's, another user's, one placed for its customer
 * by another, a deleted one) × every kind of viewer (a caller that sees all records, one that sees
 * its own, a channel, and a token of each acting for a user). Each cell asserts the status and the
 * body: the record, or the very answer a record that does not exist gets. The writes change
 * nothing when they are allowed (the same values again, or a stale If-Match), so the world is
 * made once for the file, and at the end nothing stored has changed. Imports and operations are in
 * ownership-bulk.matrix.test.ts, events, streams and webhooks in ownership-events.matrix.test.ts;
 * each file runs on SQLite and on PostgreSQL (the fast-postgres project).
 */
let test: TestApp;
let world: World;
let storedBefore: unknown;

beforeAll(async () => {
  // Load shedding has its own tests; on a busy machine its 503s would only hide these answers.
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  world = await makeWorld(test);
  storedBefore = await world.storedState();
});
afterAll(() => test.close());

const NEVER = 987654321;
const singular = (resource: Resource) => resource.slice(0, -1);
const VIEWERS: ViewerName[] = ['warehouse', 'warehouse-acting', 'shop', 'shop-acting', 'channel', 'channel-acting'];
const viewerOf = (name: ViewerName) => world.viewers.find((viewer) => viewer.name === name)!;
/** Labels of the world's records, by resource (test/helpers/ownership.ts makes them). */
const LABELS: Record<Resource, string[]> = {
  users: ['shop-customer', 'market-customer', 'warehouse-customer', 'ada', 'cleo', 'gone-customer'],
  items: ['shop-item', 'market-item', 'warehouse-item', 'gone-item'],
  orders: [
    'shop-order',
    'market-order',
    'warehouse-order',
    'ada-by-shop',
    'ada-by-warehouse',
    'cleo-by-channel',
    'cleo-by-admin',
    'gone-order',
  ],
};
const named = (resource: Resource, label: string): Named =>
  world.records[resource].find((record) => record.label === label)!;
const visible = (viewer: Viewer, record: Named) => !record.deleted && world.sees(viewer, record.resource, record.row);

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
  /** The resources it applies to. */
  resources: readonly Resource[];
  /** The scopes it needs (docs/security.md): without one, 403 whether the record exists or not. */
  scopes: (resource: Resource) => string[];
  request: (
    resource: Resource,
    record: Row,
  ) => {
    method: 'GET' | 'PUT' | 'PATCH' | 'DELETE' | 'POST';
    suffix?: string;
    headers?: Record<string, string>;
    body?: unknown;
  };
  /** The status when the viewer sees the record. */
  visible: number;
  /** What a 200 answers, when not the record itself. */
  shows?: (record: Row) => Row;
}

const STALE = '"v999"';
const read = (resource: Resource) => [`${resource}:read`];
const update = (resource: Resource) => [`${resource}:update`, `${resource}:read`];
const OPERATIONS: Operation[] = [
  { name: 'GET', resources: RESOURCES, scopes: read, request: () => ({ method: 'GET' }), visible: 200 },
  {
    name: 'GET with If-None-Match',
    resources: RESOURCES,
    scopes: read,
    request: () => ({ method: 'GET', headers: { 'if-none-match': '"v1", "v2", "v3"' } }),
    visible: 304,
  },
  {
    name: 'PUT',
    resources: RESOURCES,
    scopes: update,
    request: (resource, record) => ({ method: 'PUT', body: sameBody(resource, record) }),
    visible: 200,
  },
  {
    name: 'PATCH',
    resources: RESOURCES,
    scopes: update,
    request: (_resource, record) => ({ method: 'PATCH', body: { name: record.name } }),
    visible: 200,
  },
  {
    name: 'PUT with a stale If-Match',
    resources: RESOURCES,
    scopes: update,
    request: (resource, record) => ({
      method: 'PUT',
      headers: { 'if-match': STALE },
      body: sameBody(resource, record),
    }),
    visible: 412,
  },
  {
    name: 'PATCH with a stale If-Match',
    resources: RESOURCES,
    scopes: update,
    request: (_resource, record) => ({ method: 'PATCH', headers: { 'if-match': STALE }, body: { name: record.name } }),
    visible: 412,
  },
  {
    name: 'DELETE with a stale If-Match',
    resources: RESOURCES,
    scopes: (resource) => [`${resource}:delete`, `${resource}:read`],
    request: () => ({ method: 'DELETE', headers: { 'if-match': STALE } }),
    visible: 412,
  },
  {
    name: 'GET stock',
    resources: ['items'],
    scopes: () => ['stock:read', 'items:read'],
    request: () => ({ method: 'GET', suffix: '/stock' }),
    visible: 200,
    shows: (record) => ({ item_id: record.id }),
  },
  {
    name: 'PUT stock with a stale If-Match',
    resources: ['items'],
    scopes: () => ['stock:update', 'stock:read', 'items:read'],
    request: () => ({ method: 'PUT', suffix: '/stock', headers: { 'if-match': STALE }, body: { quantity: 1 } }),
    visible: 412,
  },
  {
    name: 'POST cancel with a stale If-Match',
    resources: ['orders'],
    scopes: () => ['orders:cancel', 'orders:read'],
    request: () => ({ method: 'POST', suffix: '/cancel', headers: { 'if-match': STALE } }),
    visible: 412,
  },
];

const CASES = OPERATIONS.flatMap((operation) =>
  operation.resources.flatMap((resource) =>
    VIEWERS.flatMap((viewer) => LABELS[resource].map((label) => ({ operation, resource, viewer, label }))),
  ),
);

describe('one record: every operation × whose record × who asks', () => {
  it.each(CASES)(
    '$operation.name /v1/$resource/{id}: as the rules say when the record is $label and $viewer asks',
    async ({ operation, resource, viewer: viewerName, label }) => {
      const viewer = viewerOf(viewerName);
      const record = named(resource, label);
      const request = operation.request(resource, record.row);
      const at = (id: number) => ({
        method: request.method,
        url: `/v1/${resource}/${id}${request.suffix ?? ''}`,
        ...(request.body === undefined ? {} : { body: request.body }),
        ...viewer.credentials,
        headers: { ...viewer.credentials.headers, ...request.headers },
      });
      const reply = await test.call(at(record.row.id));
      const missing = operation.scopes(resource).filter((scope) => !viewer.scopes.has(scope));
      if (missing.length > 0) {
        // Refused before the record is looked at: the same whether it exists or not.
        expect(reply.status, reply.text).toBe(403);
        expect(reply.json.required_scopes).toEqual(missing);
        const never = (await test.call(at(NEVER))).json;
        expect({ ...never, instance: reply.json.instance }).toEqual({ ...reply.json, request_id: expect.any(String) });
        return;
      }
      if (!visible(viewer, record)) {
        const never = await test.call(at(NEVER));
        expect(reply.status, reply.text).toBe(404);
        expect(reply.json.type).toBe(never.json.type);
        expect(reply.json.detail).toBe(never.json.detail.replace(String(NEVER), String(record.row.id)));
        expect(reply.json.detail).toBe(`There is no ${singular(resource)} ${record.row.id}.`);
        return;
      }
      expect(reply.status, reply.text).toBe(operation.visible);
      if (reply.status === 200) expect(reply.json).toMatchObject(operation.shows?.(record.row) ?? record.row);
    },
  );
});

describe('atomic batches: an entry naming a record the viewer cannot see is refused as one that does not exist', () => {
  const BATCH_CASES = RESOURCES.flatMap((resource) =>
    (['change', 'delete'] as const).flatMap((member) =>
      VIEWERS.flatMap((viewer) => LABELS[resource].map((label) => ({ resource, member, viewer, label }))),
    ),
  );

  it.each(BATCH_CASES)(
    'POST /v1/$resource/batch: a $member entry as the rules say when the record is $label and $viewer asks',
    async ({ resource, member, viewer: viewerName, label }) => {
      const viewer = viewerOf(viewerName);
      const record = named(resource, label);
      const entry = (id: number) => (member === 'change' ? { id, name: record.row.name } : { id, if_match: STALE });
      const send = (id: number) =>
        test.call({
          method: 'POST',
          url: `/v1/${resource}/batch`,
          body: { [member]: [entry(id)] },
          ...viewer.credentials,
        });
      const reply = await send(record.row.id);
      const needed = [`${resource}:update`, `${resource}:read`, ...(member === 'delete' ? [`${resource}:delete`] : [])];
      if (needed.some((scope) => !viewer.scopes.has(scope))) {
        expect(reply.status, reply.text).toBe(403);
        expect(reply.json.type).toBe('/problems/insufficient-scope');
        return;
      }
      if (!visible(viewer, record)) {
        const never = await send(NEVER);
        expect(reply.status, reply.text).toBe(422);
        expect(reply.json.type).toBe('/problems/batch-entry-refused');
        expect(reply.json.failed_entry).toEqual({
          ...never.json.failed_entry,
          detail: `There is no ${singular(resource)} ${record.row.id}.`,
        });
        expect(never.json.failed_entry).toMatchObject({
          type: '/problems/not-found',
          status: 404,
          pointer: `#/${member}/0`,
        });
        return;
      }
      if (member === 'change') {
        expect(reply.status, reply.text).toBe(200);
        expect(reply.json.change[0]).toMatchObject({ status: 200, record: record.row });
      } else {
        expect(reply.status, reply.text).toBe(409);
        expect(reply.json.failed_entry).toMatchObject({ type: '/problems/precondition-failed', status: 412 });
      }
    },
  );
});

describe('many records: ?id=, the pages of a list, and its exports show exactly what the viewer sees', () => {
  const PER_VIEWER = RESOURCES.flatMap((resource) => VIEWERS.map((viewer) => ({ resource, viewer })));

  it.each(PER_VIEWER)(
    'GET /v1/$resource?id=: each record of the world, or nothing, as $viewer sees it',
    async ({ resource, viewer: viewerName }) => {
      const viewer = viewerOf(viewerName);
      for (const record of world.records[resource]) {
        const reply = await test.call({ url: `/v1/${resource}?id=${record.row.id}`, ...viewer.credentials });
        expect(reply.status, reply.text).toBe(200);
        expect([record.label, reply.json.data]).toEqual([record.label, visible(viewer, record) ? [record.row] : []]);
      }
    },
  );

  it.each(PER_VIEWER)(
    'GET /v1/$resource: one page at a time, newest first, exactly what $viewer sees',
    async ({ resource, viewer: viewerName }) => {
      const viewer = viewerOf(viewerName);
      const ids: number[] = [];
      let url: string | undefined = `/v1/${resource}?limit=2&sort=-id`;
      for (let page = 0; url !== undefined && page < 30; page++) {
        const reply = await test.call({ url, ...viewer.credentials });
        expect(reply.status).toBe(200);
        ids.push(...reply.json.data.map((row: Row) => row.id));
        url =
          reply.json.next_cursor === null
            ? undefined
            : `/v1/${resource}?limit=2&sort=-id&cursor=${encodeURIComponent(reply.json.next_cursor)}`;
      }
      const expected = (await expectedIds(world, viewer, resource)).reverse();
      expect(ids).toEqual(expected);
      expect(ids.length).toBeGreaterThan(0);
    },
  );

  it.each(PER_VIEWER)(
    'GET /v1/$resource as NDJSON and CSV: an export holds exactly what $viewer sees',
    async ({ resource, viewer: viewerName }) => {
      const viewer = viewerOf(viewerName);
      const expected = await expectedIds(world, viewer, resource);
      const ndjson = await test.call({
        url: `/v1/${resource}?sort=id`,
        ...viewer.credentials,
        headers: { ...viewer.credentials.headers, accept: 'application/x-ndjson' },
      });
      expect(ndjson.status).toBe(200);
      const fromNdjson = ndjson.text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line).id as number);
      expect([...new Set(fromNdjson)]).toEqual(expected);
      const csv = await test.call({
        url: `/v1/${resource}?sort=id`,
        ...viewer.credentials,
        headers: { ...viewer.credentials.headers, accept: 'text/csv' },
      });
      expect(csv.status).toBe(200);
      const fromCsv = csv.text
        .trim()
        .split('\n')
        .slice(1)
        .map((line) => Number(line.split(',')[0]));
      expect([...new Set(fromCsv)]).toEqual(expected);
    },
  );

  it("GET /v1/orders?created_by=: the market's orders to a caller that sees all, none to one that sees its own", async () => {
    const url = `/v1/orders?created_by=${world.callers.market.id}`;
    const warehouse = await test.call({ url, ...viewerOf('warehouse').credentials });
    expect(warehouse.json.data.map((row: Row) => row.id)).toEqual([named('orders', 'market-order').row.id]);
    const shop = await test.call({ url, ...viewerOf('shop').credentials });
    expect(shop.json).toEqual({ data: [], next_cursor: null });
  });
});

describe('expand: an embedded record the viewer cannot see is null', () => {
  it.each(VIEWERS)(
    'GET /v1/orders/{id}?expand=user,lines.item and GET /v1/orders?expand=user: each order %s sees, with what it sees of its user and items',
    async (viewerName) => {
      const viewer = viewerOf(viewerName);
      const usersById = new Map(world.records.users.map((record) => [record.row.id, record]));
      const itemsById = new Map(world.records.items.map((record) => [record.row.id, record]));
      const shown = world.records.orders.filter((record) => visible(viewer, record));
      expect(shown.length).toBeGreaterThan(0);
      for (const order of shown) {
        const reply = await test.call({
          url: `/v1/orders/${order.row.id}?expand=user,lines.item`,
          ...viewer.credentials,
        });
        expect(reply.status, reply.text).toBe(200);
        const user = usersById.get(order.row.user_id)!;
        expect([order.label, reply.json.user]).toEqual([order.label, visible(viewer, user) ? user.row : null]);
        expect(reply.json.lines.map((line: Row) => line.item)).toEqual(
          order.row.lines.map((line: Row) => {
            const item = itemsById.get(line.item_id)!;
            return visible(viewer, item) ? item.row : null;
          }),
        );
      }
      const listed = await test.call({ url: '/v1/orders?expand=user&limit=500&sort=id', ...viewer.credentials });
      expect(listed.json.data.map((row: Row) => [row.id, row.user?.id ?? null])).toEqual(
        shown.map((order) => {
          const user = usersById.get(order.row.user_id)!;
          return [order.row.id, visible(viewer, user) ? user.row.id : null];
        }),
      );
    },
  );

  it.each(VIEWERS)(
    "GET /v1/items/{id}/stock/movements?expand=order: of the shared item's movements, the order id and order only of orders %s sees",
    async (viewerName) => {
      const viewer = viewerOf(viewerName);
      const url = `/v1/items/${world.sharedItem.id}/stock/movements?expand=order&limit=500`;
      const all = (await test.call({ url })).json.data as Row[];
      const reply = await test.call({ url, ...viewer.credentials });
      expect(reply.status, reply.text).toBe(200);
      const ordersById = new Map(world.records.orders.map((record) => [record.row.id, record]));
      expect(reply.json.data.map((row: Row) => [row.order_id, row.order?.id ?? null])).toEqual(
        all.map((row) => {
          const order = row.order_id === null ? undefined : ordersById.get(row.order_id);
          const shown = order !== undefined && visible(viewer, order) ? order.row.id : null;
          return [shown, shown];
        }),
      );
    },
  );
});

describe('what an order may name: a user the viewer cannot see is one that does not exist', () => {
  const NAMING = VIEWERS.flatMap((viewer) => LABELS.users.map((label) => ({ viewer, label })));

  it.each(NAMING)(
    'POST /v1/orders: for $label, 409 insufficient-stock when $viewer sees the user, 422 unknown-reference as for none when not; nothing stored either way',
    async ({ viewer: viewerName, label }) => {
      const viewer = viewerOf(viewerName);
      const user = named('users', label);
      // More than there is: a user it sees gets as far as the stock, and nothing is placed.
      const body = (userId: number) => ({
        name: 'too-much',
        user_id: userId,
        lines: [{ item_id: world.sharedItem.id, quantity: 100_000 }],
      });
      const reply = await test.call({
        method: 'POST',
        url: '/v1/orders',
        body: body(user.row.id),
        ...viewer.credentials,
      });
      if (visible(viewer, user)) {
        expect(reply.status, reply.text).toBe(409);
        expect(reply.json.type).toBe('/problems/insufficient-stock');
        return;
      }
      const never = await test.call({ method: 'POST', url: '/v1/orders', body: body(NEVER), ...viewer.credentials });
      expect(reply.status, reply.text).toBe(422);
      expect(reply.json.type).toBe('/problems/unknown-reference');
      expect(reply.json.errors).toEqual(
        never.json.errors.map((error: Row) => ({
          ...error,
          detail: error.detail.replace(String(NEVER), String(user.row.id)),
        })),
      );
    },
  );
});

describe('after the whole matrix', () => {
  it('PUT, PATCH, DELETE, POST …/cancel, batches, POST /v1/orders: nothing stored changed', async () => {
    expect(await world.storedState()).toEqual(storedBefore);
  });
});
