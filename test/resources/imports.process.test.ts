import { writeFileSync, createReadStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDataFile, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Crash safety of imports (docs/bulk.md "Imports", "How an import runs"): rowi is killed with
 * SIGKILL while an import runs, then started again on the same file; the operation is not left
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

describe('imports and a crash', () => {
  it(
    'POST /v1/items/import: after kill -9 during the import and a restart, the operation is failed, saying exactly which rows were committed',
    { timeout: 60_000 },
    async () => {
      const dataFile = tempDataFile();
      const spool = join(tempFolder('spool'), 'files');
      const env = { ROWI_IMPORT_DIRECTORY: spool };
      const first = await startServer({ dataFile, env });
      running.push(first);
      const file = join(tempFolder('import'), 'catalogue.csv');
      const rows = 60_000;
      let csv = 'sku,name,price,quantity\n';
      for (let index = 0; index < rows; index++) csv += `K-${index},Kettle ${index},2.00,3\n`;
      writeFileSync(file, csv);
      const posted = await fetch(`${first.baseUrl}/v1/items/import?mode=partial`, {
        method: 'POST',
        headers: {
          'content-type': 'text/csv',
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
      const second = await startServer({ dataFile, env, adminKey: first.adminKey });
      running.push(second);
      let after = await operationOf(second, location);
      for (let attempt = 0; attempt < 150 && after.status === 'running'; attempt++) {
        await pause(100);
        after = await operationOf(second, location);
      }

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
});
