import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { issueToken } from '../helpers/credentials.js';
import { BACKEND } from '../helpers/database.js';
import { Importer } from '../helpers/imports.js';
import { makeWorld, type Named, type Row, type Viewer, type ViewerName, type World } from '../helpers/ownership.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Record ownership on the paths that outlive their request (docs/access.md "Every path"): an import
 * runs with the access of the request that asked for it, so each row naming a record of the world
 * (test/helpers/ownership.ts) is taken or refused exactly as that viewer's single request would be,
 * a record it cannot see read as one that does not exist; and the operations themselves (imports,
 * and backups on SQLite) are seen by whom the docs say: an admin every one, a caller those it
 * started, a token acting for a user those started for that user by its caller. Generated: every
 * kind of viewer × every import target × every record; every viewer × every operation × every
 * read and write of it. The imports are dry runs, so the world is made once and nothing stored
 * changes. Runs on SQLite and on PostgreSQL (the fast-postgres project).
 */
let test: TestApp;
let world: World;
let imports: Importer;
let storedBefore: unknown;
const folder = tempFolder('ownership-bulk');
const NEVER = 987654321;

beforeAll(async () => {
  test = await startApp({
    ROWI_IMPORT_DIRECTORY: join(folder, 'spool'),
    ROWI_BACKUP_DIR: join(folder, 'backups'),
    ROWI_MAX_EVENT_LOOP_DELAY: '0',
  });
  const base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  imports = new Importer(test, base, folder);
  world = await makeWorld(test);
  storedBefore = await world.storedState();
});
afterAll(() => test.close());

const VIEWERS: ViewerName[] = ['warehouse', 'warehouse-acting', 'shop', 'shop-acting', 'channel', 'channel-acting'];
const viewerOf = (name: ViewerName) => world.viewers.find((viewer) => viewer.name === name)!;
const visible = (viewer: Viewer, record: Named) => !record.deleted && world.sees(viewer, record.resource, record.row);

interface Target {
  collection: string;
  query: string;
  scopes: string[];
  /** Whether acting for a user may import it (it creates no users or items). */
  acting: boolean;
  /** The records its rows name, one a row. */
  records: () => Named[];
  row: (record: Named) => Row;
  /** What becomes of a row the viewer's request would refuse, as that request would say it. */
  refusal: (record: Named, row: number) => Row;
}

const quantities = new Map<number, number>();
const TARGETS: Record<'users' | 'items' | 'stock' | 'orders', Target> = {
  users: {
    collection: 'users',
    query: '?dry_run=true&mode=partial&on_conflict=update',
    scopes: ['users:create', 'users:update'],
    acting: false,
    records: () => world.records.users,
    row: ({ row }) => ({ name: row.name, email: row.email }),
    // A user it cannot see is one it would create, whose email is taken; a deleted one's email is free again.
    refusal: ({ row }, at) => ({
      row: at,
      field: 'email',
      problem: 'email-taken',
      detail: `another user already has the email ${row.email} (emails are compared without regard to case)`,
    }),
  },
  items: {
    collection: 'items',
    query: '?dry_run=true&mode=partial&on_conflict=update',
    scopes: ['items:create', 'items:update', 'stock:update'],
    acting: false,
    records: () => world.records.items,
    row: ({ row }) => ({ sku: row.sku, name: row.name, price: row.price }),
    refusal: ({ row }, at) => ({
      row: at,
      field: 'sku',
      problem: 'sku-taken',
      detail: `another item already has the SKU ${row.sku}`,
    }),
  },
  stock: {
    collection: 'items/stock',
    query: '?dry_run=true&mode=partial',
    scopes: ['stock:update', 'items:read'],
    acting: true,
    records: () => world.records.items,
    row: ({ row }) => ({ item_id: row.id, quantity: quantities.get(row.id) ?? 1 }),
    refusal: ({ row }, at) => ({
      row: at,
      field: 'item_id',
      problem: 'unknown-reference',
      detail: `there is no item ${row.id}`,
    }),
  },
  orders: {
    collection: 'orders',
    query: '?dry_run=true&mode=partial',
    scopes: ['orders:create', 'users:read', 'items:read'],
    acting: true,
    records: () => world.records.users,
    row: ({ row }) => ({
      name: `import-for-${row.name}`,
      user_id: row.id,
      lines: [{ item_id: world.sharedItem.id, quantity: 1 }],
    }),
    refusal: ({ row }, at) => ({
      row: at,
      field: 'user_id',
      problem: 'unknown-reference',
      detail: `There is no user ${row.id}.`,
    }),
  },
};

/** The operations started in this file, with who started them (for the operations' cells). */
const started: { id: number; caller: string; acting: 'ada' | 'cleo' | null; label: string }[] = [];

const IMPORT_CASES = (Object.keys(TARGETS) as (keyof typeof TARGETS)[]).flatMap((target) =>
  VIEWERS.map((viewer) => ({ target, viewer })),
);

describe('imports: each row as the viewer’s own request would be answered', () => {
  beforeAll(async () => {
    for (const item of world.records.items) {
      const stock = await test.call({ url: `/v1/items/${item.row.id}/stock` });
      if (stock.status === 200) quantities.set(item.row.id, stock.json.quantity);
    }
  });

  it.each(IMPORT_CASES)(
    'POST /v1/$target/import: each row naming a record of the world as the rules say, when $viewer imports',
    async ({ target: name, viewer: viewerName }) => {
      const viewer = viewerOf(viewerName);
      const target = TARGETS[name];
      const records = target.records();
      const text = records.map((record) => `${JSON.stringify(target.row(record))}\n`).join('');
      const reply = await imports.upload(target.collection, text, {
        type: 'application/x-ndjson',
        query: target.query,
        ...(viewer.credentials.key ? { key: viewer.credentials.key } : { headers: viewer.credentials.headers! }),
      });
      const missing = target.scopes.filter((scope) => !viewer.scopes.has(scope));
      if (missing.length > 0) {
        expect(reply.status, reply.text).toBe(403);
        expect(reply.json).toMatchObject({ type: '/problems/insufficient-scope', required_scopes: missing });
        return;
      }
      if (viewer.acting !== null && !target.acting) {
        expect(reply.status, reply.text).toBe(403);
        expect(reply.json.type).toBe('/problems/acting-forbidden');
        return;
      }
      expect(reply.status, reply.text).toBe(202);
      started.push({
        id: reply.json.id,
        caller: viewer.caller,
        acting: viewer.acting,
        label: `${name} by ${viewerName}`,
      });
      const done: Reply = await imports.finished(reply.headers.location as string);
      expect(done.json.status, JSON.stringify(done.json)).toBe('succeeded');
      const expected = records.flatMap((record, index) => {
        // A deleted record's key is free again: its user or item would be created, its stock or user is none.
        const refused =
          name === 'users' || name === 'items' ? !record.deleted && !visible(viewer, record) : !visible(viewer, record);
        return refused ? [target.refusal(record, index + 1)] : [];
      });
      expect(done.json.errors).toEqual(expected);
      expect(done.json.progress.rows_failed).toBe(expected.length);
    },
  );
});

describe('operations: each seen by whom the docs say, and 404 as for none by every other', () => {
  /** The admin and its token acting for Ada, beside the world's viewers: the admin sees every operation, its token only Ada's. */
  const admin = {
    name: 'admin',
    caller: 'admin',
    acting: null as 'ada' | 'cleo' | null,
    credentials: {} as Viewer['credentials'],
  };
  const adminActing = { ...admin, name: 'admin-acting', acting: 'ada' as const };
  const everyone = () => [...world.viewers, admin, adminActing];

  beforeAll(async () => {
    admin.credentials = { key: test.adminKey };
    adminActing.credentials = {
      headers: {
        authorization: `Bearer ${await issueToken(test, { name: 'admin' }, test.adminKey, { user_id: String(world.users.ada.id) })}`,
      },
    };
    const line = [{ item_id: world.sharedItem.id, quantity: 1 }];
    for (const who of [admin, adminActing]) {
      const reply = await imports.upload(
        'orders',
        `${JSON.stringify({ name: 'x', user_id: world.users.ada.id, lines: line })}\n`,
        {
          type: 'application/x-ndjson',
          query: '?dry_run=true',
          ...(who.credentials.key ? { key: who.credentials.key } : { headers: who.credentials.headers! }),
        },
      );
      expect(reply.status, reply.text).toBe(202);
      await imports.finished(reply.headers.location as string);
      started.push({ id: reply.json.id, caller: 'admin', acting: who.acting, label: `orders by ${who.name}` });
    }
    // Backups are operations too (SQLite only): one by the admin; its token acting for Ada carries
    // no backups scope (acting is for one user's records), so it starts none.
    if (BACKEND === 'sqlite') {
      const reply = await test.call({ method: 'POST', url: '/v1/backups', ...admin.credentials });
      expect(reply.status, reply.text).toBe(202);
      await imports.finished(reply.headers.location as string);
      started.push({ id: reply.json.id, caller: 'admin', acting: admin.acting, label: `backup by ${admin.name}` });
      const refused = await test.call({ method: 'POST', url: '/v1/backups', ...adminActing.credentials });
      expect([refused.status, refused.json.required_scopes]).toEqual([403, ['backups:create']]);
    }
    expect(started.length).toBeGreaterThan(10);
  });

  const seesOperation = (viewer: { caller: string; acting: string | null }, operation: (typeof started)[number]) =>
    viewer.acting === null
      ? viewer.caller === 'admin' || viewer.caller === operation.caller
      : viewer.caller === operation.caller && viewer.acting === operation.acting;

  it('GET /v1/operations: each viewer lists exactly the operations it sees', async () => {
    for (const viewer of everyone()) {
      const reply = await test.call({ url: '/v1/operations?limit=500', ...viewer.credentials });
      expect(reply.status).toBe(200);
      expect([viewer.name, reply.json.data.map((operation: Row) => operation.id)]).toEqual([
        viewer.name,
        started
          .filter((operation) => seesOperation(viewer, operation))
          .map((operation) => operation.id)
          .sort((a, b) => a - b),
      ]);
    }
  });

  const READS = [
    { method: 'GET', path: (id: number) => `/v1/operations/${id}`, seen: 200 },
    { method: 'GET', path: (id: number) => `/v1/operations/${id}/errors`, seen: 200 },
    { method: 'POST', path: (id: number) => `/v1/operations/${id}/cancel`, seen: 409 },
    { method: 'DELETE', path: (id: number) => `/v1/operations/${id}`, seen: 409 },
  ] as const;

  it.each(READS.map((read) => ({ ...read, route: read.path(0).replace('/0', '/{id}') })))(
    '$method $route: as the rules say for every viewer × every operation, 404 as for none when it may not see it',
    async ({ method, path, seen }) => {
      for (const viewer of everyone())
        for (const operation of started) {
          const reply = await test.call({ method, url: path(operation.id), ...viewer.credentials });
          const cell = `${viewer.name} × ${operation.label}`;
          if (seesOperation(viewer, operation)) {
            expect([cell, reply.status]).toEqual([cell, seen]);
            if (seen === 409) expect(reply.json.type).toBe('/problems/operation-finished');
            continue;
          }
          const never = await test.call({ method, url: path(NEVER), ...viewer.credentials });
          expect([cell, reply.status, reply.json.detail]).toEqual([
            cell,
            404,
            never.json.detail.replace(String(NEVER), String(operation.id)),
          ]);
        }
    },
  );

  it('dry-run imports of every viewer: nothing stored changed', async () => {
    expect(await world.storedState()).toEqual(storedBefore);
  });
});
