import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { issueToken } from './credentials.js';
import { createCallerThroughApi, createWithKey } from './records.js';
import { CHANNEL, EDITOR } from './roles.js';

/**
 * The world of the ownership matrices (docs/access.md): callers of every kind of record access,
 * tokens acting for users, and records of every kind of owner, made once per file through the API;
 * and who sees which record, written here from the docs' rule (never taken from the code):
 *
 *   a viewer sees a record when its caller sees all of that resource or created the record, and,
 *   when it acts for a user, the record is that user (a user) or that user's (an order); items
 *   belong to no user.
 */
export type Resource = 'users' | 'items' | 'orders';
export const RESOURCES: readonly Resource[] = ['users', 'items', 'orders'];
export type CallerName = 'warehouse' | 'shop' | 'market' | 'channel';
export type ViewerName = 'warehouse' | 'warehouse-acting' | 'shop' | 'shop-acting' | 'channel' | 'channel-acting';
export type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What the editors of the world are granted beyond their role: deleting, and acting for users. */
const EDITOR_GRANTS = ['users:delete', 'items:delete', 'orders:delete', 'users:act'];

interface CallerSpec {
  body: Row;
  scopes: readonly string[];
  /** The resources it sees only its own records of. */
  own: readonly Resource[];
}

const CALLERS: Record<CallerName, CallerSpec> = {
  // Sees every record: the warehouse of docs/access.md's worked example.
  warehouse: {
    body: { role: 'editor', extra_scopes: EDITOR_GRANTS },
    scopes: [...EDITOR, ...EDITOR_GRANTS],
    own: [],
  },
  // Sees only the records it created, of every resource.
  shop: {
    body: { role: 'editor', extra_scopes: EDITOR_GRANTS, record_access: { users: 'own', items: 'own', orders: 'own' } },
    scopes: [...EDITOR, ...EDITOR_GRANTS],
    own: ['users', 'items', 'orders'],
  },
  // Another that sees only its own: whose records are "another caller's" to the shop.
  market: {
    body: { role: 'editor', extra_scopes: EDITOR_GRANTS, record_access: { users: 'own', items: 'own', orders: 'own' } },
    scopes: [...EDITOR, ...EDITOR_GRANTS],
    own: ['users', 'items', 'orders'],
  },
  // A sales channel, by its role: its own users and orders, every item.
  channel: {
    body: { role: 'channel', extra_scopes: ['users:act'] },
    scopes: [...CHANNEL, 'users:act'],
    own: ['users', 'orders'],
  },
};

export interface Viewer {
  name: ViewerName;
  caller: CallerName;
  /** The user it acts for (by the world's name), or none. */
  acting: 'ada' | 'cleo' | null;
  scopes: ReadonlySet<string>;
  /** What a request of it sends: an API key, or a bearer token. */
  credentials: { key?: string; headers?: Record<string, string> };
}

/** A record of the world, with a name that says whose it is. */
export interface Named {
  label: string;
  resource: Resource;
  /** The record as a caller that sees all reads it; for a deleted one, as it was. */
  row: Row;
  deleted: boolean;
}

export interface World {
  test: TestApp;
  callers: Record<CallerName, { id: number; key: string }>;
  users: { ada: Row; cleo: Row };
  viewers: Viewer[];
  /** Every record of the world, by resource (the deleted ones included). */
  records: Record<Resource, Named[]>;
  /** The items every viewer sees (its orders' lines name it): the shop's own item. */
  sharedItem: Row;
  /** Whether the viewer sees the record (a row as a caller that sees all reads it), as the docs say. */
  sees(viewer: Viewer, resource: Resource, row: Row): boolean;
  /** The stored state of the owned tables and stock, to compare before and after writes that must change nothing. */
  storedState(): Promise<unknown>;
}

const userOf = (resource: Resource, row: Row): number | null =>
  resource === 'users' ? row.id : resource === 'orders' ? row.user_id : null;

/** Makes the world on the test app (the admin's key is test.adminKey). */
export async function makeWorld(test: TestApp): Promise<World> {
  const callers = {} as World['callers'];
  for (const [name, spec] of Object.entries(CALLERS) as [CallerName, CallerSpec][])
    callers[name] = await createCallerThroughApi(test, name, spec.body);
  const as = (caller: CallerName | 'admin') => (caller === 'admin' ? test.adminKey : callers[caller].key);
  const make = (caller: CallerName | 'admin', url: string, body: unknown) => createWithKey(test, as(caller), url, body);

  const made: { label: string; resource: Resource; row: Row; deleted?: boolean }[] = [];
  const record = (label: string, resource: Resource, row: Row) => {
    made.push({ label, resource, row });
    return row;
  };
  const order = (caller: CallerName | 'admin', label: string, userId: number, itemId: number) =>
    make(caller, '/v1/orders', { name: label, user_id: userId, lines: [{ item_id: itemId, quantity: 1 }] }).then(
      (row) => record(label, 'orders', row),
    );
  const item = async (caller: CallerName, label: string) => {
    const row = await make(caller, '/v1/items', { name: label, sku: `SKU-${label}`, price: '1.50' });
    const stocked = await test.call({ method: 'PUT', url: `/v1/items/${row.id}/stock`, body: { quantity: 100 } });
    expect(stocked.status).toBe(200);
    return record(label, 'items', (await test.call({ url: `/v1/items/${row.id}` })).json);
  };
  const user = async (caller: CallerName | 'admin', label: string) =>
    record(label, 'users', await make(caller, '/v1/users', { name: label, email: `${label}@example.com` }));

  for (const caller of ['shop', 'market', 'warehouse'] as const) {
    const customer = await user(caller, `${caller}-customer`);
    const own = await item(caller, `${caller}-item`);
    await order(caller, `${caller}-order`, customer.id, own.id);
  }
  const sharedItem = made.find((named) => named.label === 'shop-item')!.row;
  const ada = await user('shop', 'ada');
  await order('shop', 'ada-by-shop', ada.id, sharedItem.id);
  await order('warehouse', 'ada-by-warehouse', ada.id, sharedItem.id);
  const cleo = await user('channel', 'cleo');
  await order('channel', 'cleo-by-channel', cleo.id, sharedItem.id);
  await order('admin', 'cleo-by-admin', cleo.id, sharedItem.id);
  // The shop's records the admin deleted: no viewer sees them.
  const goneUser = await user('shop', 'gone-customer');
  const goneItem = await item('shop', 'gone-item');
  const goneOrder = await order('shop', 'gone-order', goneUser.id, goneItem.id);
  for (const [resource, row] of [
    ['orders', goneOrder],
    ['items', goneItem],
    ['users', goneUser],
  ] as const) {
    const deleted = await test.call({ method: 'DELETE', url: `/v1/${resource}/${row.id}` });
    expect(deleted.status).toBe(204);
    made.find((named) => named.row === row)!.deleted = true;
  }

  const token = (caller: CallerName, userId: number) =>
    issueToken(test, { name: caller }, callers[caller].key, { user_id: String(userId) });
  const viewer = async (name: ViewerName, caller: CallerName, acting: 'ada' | 'cleo' | null): Promise<Viewer> => ({
    name,
    caller,
    acting,
    scopes: new Set(CALLERS[caller].scopes),
    credentials:
      acting === null
        ? { key: callers[caller].key }
        : { headers: { authorization: `Bearer ${await token(caller, (acting === 'ada' ? ada : cleo).id)}` } },
  });
  const viewers = [
    await viewer('warehouse', 'warehouse', null),
    await viewer('warehouse-acting', 'warehouse', 'ada'),
    await viewer('shop', 'shop', null),
    await viewer('shop-acting', 'shop', 'ada'),
    await viewer('channel', 'channel', null),
    await viewer('channel-acting', 'channel', 'cleo'),
  ];

  const records = Object.fromEntries(
    RESOURCES.map((resource) => [
      resource,
      made
        .filter((named) => named.resource === resource)
        .map((named) => ({ label: named.label, resource, row: named.row, deleted: named.deleted === true })),
    ]),
  ) as World['records'];
  const actingId = { ada: ada.id as number, cleo: cleo.id as number };
  return {
    test,
    callers,
    users: { ada, cleo },
    viewers,
    records,
    sharedItem,
    sees(viewer, resource, row) {
      const owner = !CALLERS[viewer.caller].own.includes(resource) || row.created_by === callers[viewer.caller].id;
      const user = viewer.acting === null || resource === 'items' || userOf(resource, row) === actingId[viewer.acting];
      return owner && user;
    },
    storedState: async () => {
      const db = test.storage.db;
      return {
        users: await db.selectFrom('users').selectAll().orderBy('id').execute(),
        items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
        orders: await db.selectFrom('orders').selectAll().orderBy('id').execute(),
        lines: await db.selectFrom('order_lines').selectAll().orderBy('order_id').orderBy('item_id').execute(),
        stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
        movements: await db.selectFrom('stock_movements').select('id').orderBy('id').execute(),
      };
    },
  };
}

/** The ids a list or an export of `resource` shows the viewer: every stored record it sees, read as one that sees all. */
export async function expectedIds(world: World, viewer: Viewer, resource: Resource): Promise<number[]> {
  const all = (await world.test.call({ url: `/v1/${resource}?limit=500&sort=id` })).json.data as Row[];
  return all.filter((row) => world.sees(viewer, resource, row)).map((row) => row.id as number);
}
