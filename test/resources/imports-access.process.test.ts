import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';

/**
 * An import runs with the access of the request that asked for it wherever it runs
 * (docs/access.md "Every path"): on the import thread (ROWI_IMPORT_THREAD=thread), and under
 * --workers, where the worker that took the upload runs it and any worker answers for its
 * operation. The built rowi, on SQLite and on PostgreSQL: a caller that sees all records sets the
 * stock of items another caller made; a token acting for a user places that user's orders only and
 * sees only its own operations.
 */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const running: RunningServer[] = [];
afterAll(async () => {
  for (const server of running.splice(0)) await server.stop();
});

async function send(server: RunningServer, method: string, path: string, auth: Record<string, string>, body?: unknown) {
  const reply = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await reply.text();
  return {
    status: reply.status,
    json: text === '' ? undefined : (JSON.parse(text) as Row),
    location: reply.headers.get('location'),
  };
}

async function upload(server: RunningServer, path: string, rows: unknown[], auth: Record<string, string>) {
  const reply = await fetch(`${server.baseUrl}${path}?mode=partial`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/x-ndjson' },
    body: rows.map((row) => `${JSON.stringify(row)}\n`).join(''),
  });
  expect(reply.status, await reply.clone().text()).toBe(202);
  const location = reply.headers.get('location')!;
  for (let attempt = 0; attempt < 1500; attempt++) {
    const seen = await send(server, 'GET', location, auth);
    if (seen.status === 200 && !['queued', 'running'].includes(seen.json!.status)) return seen.json!;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${location} did not end`);
}

async function caller(server: RunningServer, name: string, body: Row) {
  const admin = { 'x-api-key': server.adminKey };
  const created = await send(server, 'POST', '/v1/callers', admin, { name, ...body });
  expect(created.status).toBe(201);
  const key = await send(server, 'POST', `/v1/callers/${created.json!.id}/keys`, admin, {});
  return { id: created.json!.id as number, name, auth: { 'x-api-key': key.json!.key as string } };
}

async function actingToken(server: RunningServer, name: string, auth: Record<string, string>, userId: number) {
  const reply = await fetch(`${server.baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: name,
      client_secret: auth['x-api-key']!,
      user_id: String(userId),
    }).toString(),
  });
  expect(reply.status).toBe(200);
  return { authorization: `Bearer ${((await reply.json()) as Row).access_token}` };
}

describe.each<{ where: string; env: Record<string, string> }>([
  { where: 'the import thread', env: { ROWI_IMPORT_THREAD: 'thread' } },
  { where: 'two workers', env: { ROWI_WORKERS: '2' } },
])('imports run with their request’s access on $where', ({ env }) => {
  it(
    'POST /v1/items/stock/import, POST /v1/orders/import: the warehouse sets the stock of items another caller made; a token acting for Ada places Ada’s orders only and sees only its own operations',
    { timeout: 60_000 },
    async () => {
      const server = await startServer({ env });
      running.push(server);
      const catalogue = await caller(server, 'catalogue', { role: 'editor' });
      const warehouse = await caller(server, 'warehouse', { role: 'editor' });
      const shop = await caller(server, 'web-shop', { role: 'channel', extra_scopes: ['users:act'] });
      const item = await send(server, 'POST', '/v1/items', catalogue.auth, { sku: 'P-1', name: 'Pan', price: '9.00' });
      expect(item.status).toBe(201);

      const levels = await upload(server, '/v1/items/stock/import', [{ sku: 'P-1', quantity: 40 }], warehouse.auth);
      expect(levels).toMatchObject({ status: 'succeeded', errors: [], progress: { rows_succeeded: 1 } });
      expect((await send(server, 'GET', `/v1/items/${item.json!.id}/stock`, warehouse.auth)).json!.quantity).toBe(40);

      const ada = (await send(server, 'POST', '/v1/users', shop.auth, { name: 'Ada', email: 'ada@example.com' })).json!;
      const carl = (await send(server, 'POST', '/v1/users', shop.auth, { name: 'Carl', email: 'carl@example.com' }))
        .json!;
      const token = await actingToken(server, 'web-shop', shop.auth, ada.id);
      const line = [{ item_id: item.json!.id, quantity: 1 }];
      const byKey = await upload(
        server,
        '/v1/orders/import',
        [{ name: 'k', user_id: carl.id, lines: line }],
        shop.auth,
      );
      const byToken = await upload(
        server,
        '/v1/orders/import',
        [
          { name: 'for-ada', user_id: ada.id, lines: line },
          { name: 'for-carl', user_id: carl.id, lines: line },
        ],
        token,
      );
      expect(byToken.errors).toEqual([
        { row: 2, field: 'user_id', problem: 'unknown-reference', detail: `There is no user ${carl.id}.` },
      ]);
      const orders = (await send(server, 'GET', '/v1/orders?limit=500', shop.auth)).json!.data as Row[];
      expect(orders.filter((order) => order.name.startsWith('for-')).map((order) => order.user_id)).toEqual([ada.id]);
      // Any worker answers the same for the operations: the token sees its own only, its caller both.
      for (let ask = 0; ask < 4; ask++) {
        const listed = (await send(server, 'GET', '/v1/operations', token)).json!.data as Row[];
        expect(listed.map((operation) => operation.id)).toEqual([byToken.id]);
        expect((await send(server, 'GET', `/v1/operations/${byKey.id}`, token)).status).toBe(404);
        const all = (await send(server, 'GET', '/v1/operations', shop.auth)).json!.data as Row[];
        expect(all.map((operation) => operation.id)).toEqual([byKey.id, byToken.id]);
      }
    },
  );
});
