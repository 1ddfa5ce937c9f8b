import { writeFileSync, createReadStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/database.js';
import { startServer, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Crash safety of imports (docs/bulk.md "Imports", "How an import runs"): rowi is killed with
 * SIGKILL while an import runs, then started again on the same database (SQLite, and PostgreSQL,
 * where imports run on the event loop by default); the operation is not left
 * running: it is marked failed, and says exactly which rows were committed, which are exactly the
 * rows stored, each with its stock and movement.
 */
const running: RunningServer[] = [];
afterEach(async () => {
  for (const server of running.splice(0))
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function operationOf(server: RunningServer, location: string) {
  const reply = await fetch(`${server.baseUrl}${location}`, { headers: { 'x-api-key': server.adminKey } });
  return (await reply.json()) as {
    status: string;
    progress: { committed_through: number; rows_succeeded: number; rows_failed: number };
    summary: { rows_committed: number; committed: string; detail: string } | null;
  };
}

/**
 * Posts `file` to an import, waits until its first chunk is committed, kills the server with
 * SIGKILL, starts it again on the same database and waits until the operation is no longer running.
 */
async function killedMidImport(
  first: RunningServer,
  path: string,
  file: string,
  mediaType: string,
  start: { database: Record<string, string>; env: Record<string, string> },
): Promise<{ second: RunningServer; after: Awaited<ReturnType<typeof operationOf>> }> {
  const posted = await fetch(`${first.baseUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': mediaType,
      'x-api-key': first.adminKey,
      'content-length': String(statSync(file).size),
    },
    body: createReadStream(file) as unknown as RequestInit['body'],
    duplex: 'half',
  } as RequestInit);
  expect(posted.status).toBe(202);
  const location = posted.headers.get('location')!;
  let seen = await operationOf(first, location);
  for (let attempt = 0; attempt < 400 && seen.progress.committed_through === 0; attempt++) {
    await pause(20);
    seen = await operationOf(first, location);
  }
  expect(seen.status).toBe('running');

  first.child.kill('SIGKILL');
  await first.exited;
  const second = await startServer({ ...start, adminKey: first.adminKey });
  running.push(second);
  let after = await operationOf(second, location);
  for (let attempt = 0; attempt < 150 && after.status === 'running'; attempt++) {
    await pause(100);
    after = await operationOf(second, location);
  }
  return { second, after };
}

describe('imports and a crash', () => {
  it(
    'POST /v1/items/import: after kill -9 during the import and a restart, the operation is failed, saying exactly which rows were committed',
    { timeout: 60_000 },
    async () => {
      const { env: database } = await createTestDatabase();
      const spool = join(tempFolder('spool'), 'files');
      const env = { ROWI_IMPORT_DIRECTORY: spool };
      const first = await startServer({ database, env });
      running.push(first);
      const file = join(tempFolder('import'), 'catalogue.csv');
      const rows = 60_000;
      let csv = 'sku,name,price,quantity\n';
      for (let index = 0; index < rows; index++) csv += `K-${index},Kettle ${index},2.00,3\n`;
      writeFileSync(file, csv);
      const { second, after } = await killedMidImport(first, '/v1/items/import?mode=partial', file, 'text/csv', {
        database,
        env,
      });

      expect(after.status).toBe('failed');
      expect(after.summary!.detail).toMatch(/stopped/);
      const items = await fetch(`${second.baseUrl}/v1/items?sku=K-0`, { headers: { 'x-api-key': second.adminKey } });
      expect(items.status).toBe(200);
      // What the operation says was committed is what is stored: rows 2..committed_through, none failed.
      const committed = after.progress.committed_through;
      expect(committed).toBeGreaterThan(1);
      expect(committed).toBeLessThan(rows + 1);
      expect(after.summary!.rows_committed).toBe(committed - 1);
      const last = await fetch(`${second.baseUrl}/v1/items?sku=K-${committed - 2}`, {
        headers: { 'x-api-key': second.adminKey },
      });
      expect(((await last.json()) as { data: unknown[] }).data).toHaveLength(1);
      const next = await fetch(`${second.baseUrl}/v1/items?sku=K-${committed - 1}`, {
        headers: { 'x-api-key': second.adminKey },
      });
      expect(((await next.json()) as { data: unknown[] }).data).toHaveLength(0);
      const page = await fetch(`${second.baseUrl}/v1/items?limit=1&sort=-id`, {
        headers: { 'x-api-key': second.adminKey },
      });
      const newest = ((await page.json()) as { data: { id: number; sku: string }[] }).data[0]!;
      expect(newest.sku).toBe(`K-${committed - 2}`);
      const stock = await fetch(`${second.baseUrl}/v1/items/${newest.id}/stock`, {
        headers: { 'x-api-key': second.adminKey },
      });
      expect(((await stock.json()) as { quantity: number }).quantity).toBe(3);
    },
  );

  it(
    'POST /v1/orders/import: after kill -9 during the import and a restart, the operation is failed, and exactly the orders it says were committed hold stock',
    { timeout: 60_000 },
    async () => {
      const { env: database } = await createTestDatabase();
      const env = { ROWI_IMPORT_DIRECTORY: join(tempFolder('spool'), 'files') };
      const first = await startServer({ database, env });
      running.push(first);
      const send = async (server: RunningServer, method: string, path: string, body?: unknown) => {
        const reply = await fetch(`${server.baseUrl}${path}`, {
          method,
          headers: { 'x-api-key': server.adminKey, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return (await reply.json()) as Record<string, number>;
      };
      const user = await send(first, 'POST', '/v1/users', { name: 'Crash buyer', email: 'crash.buyer@example.com' });
      const item = await send(first, 'POST', '/v1/items', { name: 'Crash item', sku: 'CRASH-1', price: '1.00' });
      const initial = 1_000_000;
      await send(first, 'PUT', `/v1/items/${item.id}/stock`, { quantity: initial });
      const file = join(tempFolder('import'), 'orders.ndjson');
      const orders = 20_000;
      let ndjson = '';
      for (let index = 0; index < orders; index++)
        ndjson += `{"name":"O-${index}","user_id":${user.id},"lines":[{"item_id":${item.id},"quantity":1}]}\n`;
      writeFileSync(file, ndjson);
      const { second, after } = await killedMidImport(
        first,
        '/v1/orders/import?mode=partial',
        file,
        'application/x-ndjson',
        { database, env },
      );

      expect(after.status).toBe('failed');
      // One order a line, none refused: the lines up to committed_through are the orders committed.
      const committed = after.progress.committed_through;
      expect(committed).toBeGreaterThan(0);
      expect(committed).toBeLessThan(orders);
      expect(after.summary!.rows_committed).toBe(committed);
      const stock = await send(second, 'GET', `/v1/items/${item.id}/stock`);
      expect([stock.quantity, stock.reserved]).toEqual([initial - committed, committed]);
    },
  );
});
