import { join } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessOf } from '../../src/auth/access.js';
import { nowTimestamp } from '../../src/db/clock.js';
import { startImportRunner, spoolPath } from '../../src/engine/imports/runner.js';
import { IMPORTERS } from '../../src/api/importers.js';
import { insertOperation } from '../../src/engine/operations/operations.repository.js';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';
import { createCallerThroughApi, createWithKey } from '../helpers/records.js';
import { Importer } from '../helpers/imports.js';
import { startIssuer, type LocalIssuer } from '../helpers/issuer.js';
import { expectProblem } from '../helpers/problems.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * An import runs with the access of the request that asked for it (docs/access.md "Every path"),
 * never with one rebuilt from its operation's row: a caller that sees all records imports stock and
 * updates for records other callers made (the warehouse's nightly stock levels), one that sees only
 * its own is refused another's as a record that does not exist, a request acting for a user
 * creates no users or items and names no other user, and an external issuer's token is narrowed as
 * its requests are. And the operations themselves: a token acting for a user sees only the
 * operations started for that user by its caller. One app for the file; the same file runs on
 * PostgreSQL.
 */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUDIENCE = 'https://rowi.test/api';
let test: TestApp;
let issuer: LocalIssuer;
let imports: Importer;
let folder: string;
/** catalogue: an editor that made the items; warehouse: an editor that sees all; market: an editor that sees only its own; shop: a channel. */
const callers: Record<'catalogue' | 'warehouse' | 'market' | 'shop', { id: number; name: string; key: string }> =
  {} as never;
let items: Row[];
let ada: Row;
let bob: Row;
let carl: Row;
let adminId: number;

const caller = (name: string, body: Row) => createCallerThroughApi(test, name, body);

const make = (key: string, url: string, body: unknown) => createWithKey(test, key, url, body);

const ndjson = (rows: unknown[]) => rows.map((row) => `${JSON.stringify(row)}\n`).join('');
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Uploads the rows as NDJSON with these credentials and answers the operation once it has ended. */
async function imported(
  collection: string,
  rows: unknown[],
  credentials: { key?: string; headers?: Record<string, string> },
  query = '?mode=partial',
): Promise<Reply> {
  const started = await imports.upload(collection, ndjson(rows), {
    type: 'application/x-ndjson',
    query,
    ...credentials,
  });
  expect(started.status, started.text).toBe(202);
  return imports.finished(started.headers.location as string, test.adminKey);
}

const stored = (table: 'items' | 'users', id: number) =>
  test.storage.db.selectFrom(table).selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const quantityOf = async (itemId: number) =>
  (await test.storage.db.selectFrom('stock').select('quantity').where('item_id', '=', itemId).executeTakeFirstOrThrow())
    .quantity;

beforeAll(async () => {
  folder = tempFolder('imports-access');
  issuer = await startIssuer({ audience: AUDIENCE });
  test = await startApp({
    ROWI_IMPORT_DIRECTORY: join(folder, 'spool'),
    ROWI_JWT_ISSUER: issuer.url,
    ROWI_JWT_AUDIENCE: AUDIENCE,
    ROWI_JWT_JWKS_URL: issuer.jwksUrl,
    ROWI_JWT_USER_CLAIM: 'rowi_user',
    ROWI_AUDIT_FLUSH_INTERVAL: '50',
    ROWI_MAX_EVENT_LOOP_DELAY: '0',
  });
  const base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  imports = new Importer(test, base, folder);
  adminId = ((await test.call({ url: '/v1/callers' })).json.data as Row[]).find((row) => row.name === 'admin')!.id;
  callers.catalogue = await caller('catalogue', { role: 'editor' });
  callers.warehouse = await caller('warehouse', { role: 'editor', extra_scopes: ['users:act'] });
  callers.market = await caller('market', {
    role: 'editor',
    extra_scopes: ['users:act'],
    record_access: { users: 'own', items: 'own', orders: 'own' },
  });
  callers.shop = await caller('web-shop', { role: 'channel', extra_scopes: ['users:act'] });
  items = [];
  for (const sku of ['CAT-1', 'CAT-2', 'CAT-3'])
    items.push(await make(callers.catalogue.key, '/v1/items', { sku, name: `Item ${sku}`, price: '1.00' }));
  for (const item of items)
    await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity: 50 } });
  ada = await make(callers.shop.key, '/v1/users', { name: 'Ada', email: 'ada@example.com' });
  carl = await make(callers.shop.key, '/v1/users', { name: 'Carl', email: 'carl@example.com' });
  bob = await make(callers.catalogue.key, '/v1/users', { name: 'Bob', email: 'bob@example.com' });
});
afterAll(async () => {
  await test?.close();
  await issuer?.close();
});

describe('an import by a caller that sees every record', () => {
  it('POST /v1/items/stock/import: the warehouse sets the stock of items another caller created, by sku and by item_id', async () => {
    const done = await imported(
      'items/stock',
      [
        { sku: 'CAT-1', quantity: 7 },
        { item_id: items[1]!.id, quantity: 8 },
      ],
      { key: callers.warehouse.key },
    );
    expect(done.json).toMatchObject({ status: 'succeeded', errors: [], progress: { rows_succeeded: 2 } });
    expect([await quantityOf(items[0]!.id), await quantityOf(items[1]!.id)]).toEqual([7, 8]);
  });

  it('POST /v1/items/import: the admin updates (on_conflict=update) and skips items another caller created', async () => {
    const done = await imported(
      'items',
      [{ sku: 'CAT-3', name: 'Renamed by the admin', price: '2.00', quantity: 9 }],
      { key: test.adminKey },
      '?mode=partial&on_conflict=update',
    );
    expect(done.json).toMatchObject({ status: 'succeeded', errors: [], progress: { rows_succeeded: 1 } });
    expect(await stored('items', items[2]!.id)).toMatchObject({ name: 'Renamed by the admin', price: 200 });
    expect(await quantityOf(items[2]!.id)).toBe(9);
    const skipped = await imported(
      'items',
      [{ sku: 'CAT-3', name: 'x', price: '3.00' }],
      { key: test.adminKey },
      '?on_conflict=skip',
    );
    expect(skipped.json).toMatchObject({ status: 'succeeded', errors: [], progress: { rows_skipped: 1 } });
  });

  it('POST /v1/users/import: the warehouse updates (on_conflict=update) a user another caller created', async () => {
    const done = await imported(
      'users',
      [{ name: 'Bob Renamed', email: 'BOB@example.com' }],
      { key: callers.warehouse.key },
      '?on_conflict=update',
    );
    expect(done.json).toMatchObject({ status: 'succeeded', errors: [], progress: { rows_succeeded: 1 } });
    expect(await stored('users', bob.id)).toMatchObject({ name: 'Bob Renamed', email: 'BOB@example.com' });
  });
});

describe('an import by a caller that sees only its own records', () => {
  it("POST /v1/items/import, POST /v1/items/stock/import: another caller's item is refused as one that does not exist, and nothing changes", async () => {
    const before = await stored('items', items[0]!.id);
    const quantity = await quantityOf(items[0]!.id);
    for (const onConflict of ['update', 'skip']) {
      const done = await imported(
        'items',
        [{ sku: 'CAT-1', name: 'Taken over', price: '9.00' }],
        { key: callers.market.key },
        `?mode=partial&on_conflict=${onConflict}`,
      );
      // What creating that item answers: its SKU is taken (SKUs are unique whoever's item has them).
      expect(done.json.errors).toEqual([
        { row: 1, field: 'sku', problem: 'sku-taken', detail: 'another item already has the SKU CAT-1' },
      ]);
    }
    const levels = await imported(
      'items/stock',
      [
        { item_id: items[0]!.id, quantity: 1 },
        { item_id: 987654321, quantity: 1 },
        { sku: 'CAT-1', quantity: 1 },
        { sku: 'NO-SUCH-SKU', quantity: 1 },
      ],
      { key: callers.market.key },
    );
    expect(levels.json.errors).toEqual([
      { row: 1, field: 'item_id', problem: 'unknown-reference', detail: `there is no item ${items[0]!.id}` },
      { row: 2, field: 'item_id', problem: 'unknown-reference', detail: 'there is no item 987654321' },
      { row: 3, field: 'sku', problem: 'unknown-reference', detail: 'there is no item with the SKU CAT-1' },
      { row: 4, field: 'sku', problem: 'unknown-reference', detail: 'there is no item with the SKU NO-SUCH-SKU' },
    ]);
    expect(await stored('items', items[0]!.id)).toEqual(before);
    expect(await quantityOf(items[0]!.id)).toBe(quantity);
  });
});

describe('an import by a request acting for a user', () => {
  it('POST /v1/users/import: 403 acting-forbidden and no operation, the other user unchanged, when a token acting for one user of the caller asks (on_conflict=update)', async () => {
    const first = await make(callers.market.key, '/v1/users', { name: 'First', email: 'first@example.com' });
    const second = await make(callers.market.key, '/v1/users', { name: 'Second', email: 'second@example.com' });
    const token = await issueToken(test, callers.market, callers.market.key, { user_id: String(first.id) });
    const before = await stored('users', second.id);
    const operations = await test.storage.db.selectFrom('operations').select('id').execute();
    const refused = await imports.upload('users', ndjson([{ name: 'Overwritten', email: 'second@example.com' }]), {
      type: 'application/x-ndjson',
      query: '?on_conflict=update',
      headers: bearer(token),
    });
    const problem = expectProblem(refused, 403, 'acting-forbidden');
    expect(problem.detail).toBe(
      `A request acting for user ${first.id} may not create users: acting serves one person. Create users with the caller's own credentials.`,
    );
    expect(await stored('users', second.id)).toEqual(before);
    expect(await test.storage.db.selectFrom('operations').select('id').execute()).toEqual(operations);
  });

  it("POST /v1/items/import: 403 acting-forbidden when an all-records caller's token acting for a user asks", async () => {
    const token = await issueToken(test, callers.warehouse, callers.warehouse.key, { user_id: String(ada.id) });
    const refused = await imports.upload('items', ndjson([{ sku: 'NEW-1', name: 'New', price: '1.00' }]), {
      type: 'application/x-ndjson',
      headers: bearer(token),
    });
    expectProblem(refused, 403, 'acting-forbidden');
    expect(await test.storage.db.selectFrom('items').select('id').where('sku', '=', 'NEW-1').execute()).toEqual([]);
  });

  it("POST /v1/users/import: 403 acting-forbidden for an external issuer's token whose claim names a user, and no user changes", async () => {
    const token = await issuer.sign({ sub: 'ada@idp', rowi_user: String(ada.id), scope: 'users:create users:update' });
    const before = await stored('users', bob.id);
    const refused = await imports.upload('users', ndjson([{ name: 'Bob Overwritten', email: 'bob@example.com' }]), {
      type: 'application/x-ndjson',
      query: '?on_conflict=update',
      headers: bearer(token),
    });
    expectProblem(refused, 403, 'acting-forbidden');
    expect(await stored('users', bob.id)).toEqual(before);
  });

  it("POST /v1/orders/import: a channel's token acting for Ada places Ada's orders only; another customer is refused as a user that does not exist; the audit names both", async () => {
    const token = await issueToken(test, callers.shop, callers.shop.key, { user_id: String(ada.id) });
    const line = { item_id: items[0]!.id, quantity: 1 };
    const done = await imported(
      'orders',
      [
        { name: 'ada-import', user_id: ada.id, lines: [line] },
        { name: 'carl-import', user_id: carl.id, lines: [line] },
        { name: 'never-import', user_id: 987654321, lines: [line] },
      ],
      { headers: bearer(token) },
    );
    expect(done.json.status).toBe('succeeded');
    expect(done.json.errors).toEqual([
      { row: 2, field: 'user_id', problem: 'unknown-reference', detail: `There is no user ${carl.id}.` },
      { row: 3, field: 'user_id', problem: 'unknown-reference', detail: 'There is no user 987654321.' },
    ]);
    const placed = await test.storage.db
      .selectFrom('orders')
      .select(['id', 'user_id', 'created_by'])
      .where('name', 'like', '%-import')
      .execute();
    expect(placed.map((order) => ({ user_id: Number(order.user_id), created_by: Number(order.created_by) }))).toEqual([
      { user_id: ada.id, created_by: callers.shop.id },
    ]);
    const audited = await test.storage.db
      .selectFrom('audit_events')
      .select(['caller_id', 'caller_name', 'credential', 'user_id', 'method'])
      .where('path', '=', `/v1/orders/${placed[0]!.id}`)
      .execute();
    expect(audited.map((row) => ({ ...row, caller_id: Number(row.caller_id), user_id: Number(row.user_id) }))).toEqual([
      { caller_id: callers.shop.id, caller_name: 'web-shop', credential: 'oauth', user_id: ada.id, method: 'POST' },
    ]);
  });

  it("POST /v1/orders/import: an external issuer's token whose claim names Ada places orders for Ada only", async () => {
    const token = await issuer.sign({
      sub: 'ada@idp',
      rowi_user: String(ada.id),
      scope: 'orders:create users:read items:read operations:read',
    });
    const line = { item_id: items[0]!.id, quantity: 1 };
    const done = await imported(
      'orders',
      [
        { name: 'ext-ada', user_id: ada.id, lines: [line] },
        { name: 'ext-bob', user_id: bob.id, lines: [line] },
      ],
      { headers: bearer(token) },
    );
    expect(done.json.errors).toEqual([
      { row: 2, field: 'user_id', problem: 'unknown-reference', detail: `There is no user ${bob.id}.` },
    ]);
    const placed = await test.storage.db
      .selectFrom('orders')
      .select(['user_id', 'created_by'])
      .where('name', 'like', 'ext-%')
      .execute();
    expect(placed.map((order) => [Number(order.user_id), order.created_by])).toEqual([[ada.id, null]]);
  });
});

describe('operations: a token acting for a user sees only those started for that user by its caller', () => {
  it('GET, errors, cancel and DELETE /v1/operations/{id}, GET /v1/operations: 404 as for none, and listed only when started for the same user by the same caller', async () => {
    const adaToken = await issueToken(test, { name: 'admin' }, test.adminKey, { user_id: String(ada.id) });
    const carlToken = await issueToken(test, { name: 'admin' }, test.adminKey, { user_id: String(carl.id) });
    const line = { item_id: items[1]!.id, quantity: 1 };
    // Each with a refused row, so that errors has something to tell.
    const rows = (name: string, userId: number) => [
      { name, user_id: userId, lines: [line] },
      { name: `${name}-bad`, user_id: 987654321, lines: [line] },
    ];
    const forAda = (await imported('orders', rows('op-ada', ada.id), { headers: bearer(adaToken) })).json;
    const forCarl = (await imported('orders', rows('op-carl', carl.id), { headers: bearer(carlToken) })).json;
    const byAdmin = (await imported('orders', rows('op-admin', ada.id), { key: test.adminKey })).json;
    const ids = [forAda.id, forCarl.id, byAdmin.id];

    const listed = async (headers: Record<string, string>) =>
      ((await test.call({ url: '/v1/operations?limit=500', headers })).json.data as Row[])
        .map((operation) => operation.id)
        .filter((id) => ids.includes(id));
    expect(await listed(bearer(adaToken))).toEqual([forAda.id]);
    expect(await listed(bearer(carlToken))).toEqual([forCarl.id]);
    // The admin itself (acting for nobody) sees all of them.
    expect(await listed({ 'x-api-key': test.adminKey })).toEqual(ids);

    const never = 987654321;
    for (const id of [forCarl.id, byAdmin.id]) {
      for (const [method, path] of [
        ['GET', `/v1/operations/${id}`],
        ['GET', `/v1/operations/${id}/errors`],
        ['POST', `/v1/operations/${id}/cancel`],
        ['DELETE', `/v1/operations/${id}`],
      ] as const) {
        const hidden = await test.call({ method, url: path, headers: bearer(adaToken) });
        const none = await test.call({
          method,
          url: path.replace(String(id), String(never)),
          headers: bearer(adaToken),
        });
        expectProblem(hidden, 404, 'not-found');
        expect(hidden.json.detail).toBe(none.json.detail.replace(String(never), String(id)));
      }
    }
    const own = await test.call({ url: `/v1/operations/${forAda.id}`, headers: bearer(adaToken) });
    expect(own.status).toBe(200);
    expect(own.json).toMatchObject({
      id: forAda.id,
      created_by: adminId,
      errors: [{ row: 2, problem: 'unknown-reference' }],
    });
    const errors = await test.call({ url: `/v1/operations/${forAda.id}/errors`, headers: bearer(adaToken) });
    expect(errors.status).toBe(200);
    expect(
      errors.text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).row),
    ).toEqual([2]);
    // An ended one is 409 to one that sees it: the 404s above are not that.
    expectProblem(
      await test.call({ method: 'POST', url: `/v1/operations/${forAda.id}/cancel`, headers: bearer(adaToken) }),
      409,
      'operation-finished',
    );
  });

  it("GET /v1/operations: a channel's token acting for Ada sees its own imports, not its caller's; the caller sees both", async () => {
    const token = await issueToken(test, callers.shop, callers.shop.key, { user_id: String(ada.id) });
    const line = { item_id: items[1]!.id, quantity: 1 };
    const byToken = (
      await imported('orders', [{ name: 'shop-ada', user_id: ada.id, lines: [line] }], { headers: bearer(token) })
    ).json;
    const byKey = (
      await imported('orders', [{ name: 'shop-carl', user_id: carl.id, lines: [line] }], { key: callers.shop.key })
    ).json;
    const listed = async (credentials: { key?: string; headers?: Record<string, string> }) =>
      ((await test.call({ url: '/v1/operations?limit=500', ...credentials })).json.data as Row[]).map(
        (operation) => operation.id,
      );
    expect(await listed({ headers: bearer(token) })).not.toContain(byKey.id);
    expect(await listed({ headers: bearer(token) })).toContain(byToken.id);
    expect(await listed({ key: callers.shop.key })).toEqual(expect.arrayContaining([byToken.id, byKey.id]));
    expect((await test.call({ url: `/v1/operations/${byKey.id}`, headers: bearer(token) })).status).toBe(404);
  });

  it("GET /v1/events: an admin's token acting for a user gets no operation events; the admin's key does", async () => {
    const token = await issueToken(test, { name: 'admin' }, test.adminKey, { user_id: String(ada.id) });
    const types = async (credentials: { key?: string; headers?: Record<string, string> }) =>
      ((await test.call({ url: '/v1/events?limit=500', ...credentials })).json.data as Row[]).map(
        (event) => event.type,
      );
    expect(await types({ key: test.adminKey })).toContain('operation.completed');
    const acting = await types({ headers: bearer(token) });
    expect(acting.length).toBeGreaterThan(0);
    expect(acting.filter((type) => type.startsWith('operation.'))).toEqual([]);
  });
});

describe('an operation stored without the access of its request', () => {
  it('the runner refuses it, failed and saying why, storing nothing, when an operation has no stored access (queued before migration 0018)', async () => {
    const directory = join(folder, 'old-spool');
    const runner = startImportRunner({
      db: test.storage.db,
      log: test.app.log,
      targets: IMPORTERS,
      concurrency: 1,
      callerConcurrency: 1,
      directory,
    });
    try {
      mkdirSync(directory, { recursive: true });
      const now = nowTimestamp();
      const admin = accessOf({
        credential: 'api_key',
        callerId: adminId,
        name: 'admin',
        scopes: new Set(),
        ownRecords: new Set(),
        userId: null,
      });
      const operation = await insertOperation(test.storage.db, {
        kind: 'import',
        target: 'users',
        status: 'queued',
        media_type: 'application/x-ndjson',
        mode: 'partial',
        on_conflict: 'update',
        dry_run: 0,
        created_by: admin.callerId,
        caller_name: admin.name,
        user_id: null,
        access: null,
        request_id: 'before-0018',
        holder: runner.holder,
        lease_until: runner.leaseUntil(),
        bytes_total: 60,
        summary: null,
        version: 1,
        created_at: now,
        updated_at: now,
        started_at: null,
        finished_at: null,
      });
      writeFileSync(spoolPath(directory, operation.id), ndjson([{ name: 'Bob Again', email: 'bob@example.com' }]));
      const before = await stored('users', bob.id);
      runner.wake();
      const done = await imports.finished(`/v1/operations/${operation.id}`);
      expect(done.json).toMatchObject({
        status: 'failed',
        progress: { rows_read: 0, rows_succeeded: 0 },
        summary: {
          detail:
            'The import was queued by an earlier version of rowi, which did not keep the access of the request that asked for it, so it was not run: nothing was read or stored. Upload the file again.',
          rows_committed: 0,
        },
      });
      expect(await stored('users', bob.id)).toEqual(before);
    } finally {
      await runner.close();
    }
  });
});
