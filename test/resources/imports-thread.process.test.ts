import { createReadStream, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BACKEND } from '../helpers/database.js';
import { startServer, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Imports on the import thread (docs/bulk.md "Queue and turns"): the built rowi runs every
 * import on a thread of its own (ROWI_IMPORT_THREAD=thread; auto, the default, chooses it on
 * SQLite), with a database connection of its own. What the process's main thread must still do
 * for it: wake its event stream on the events the thread commits, carry a cancel to it, and stop
 * it at its next commit when rowi is stopped (SIGTERM), which then ends with exit code 0. On
 * SQLite and on PostgreSQL; and where the default runs them on each.
 */
const running: RunningServer[] = [];
afterEach(async () => {
  for (const server of running.splice(0))
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Operation {
  id: number;
  status: string;
  progress: { committed_through: number; rows_succeeded: number };
  summary: { rows_committed: number; detail: string } | null;
}

async function operationOf(server: RunningServer, location: string): Promise<Operation> {
  const reply = await fetch(`${server.baseUrl}${location}`, { headers: { 'x-api-key': server.adminKey } });
  expect(reply.status).toBe(200);
  return (await reply.json()) as Operation;
}

/** A CSV of `rows` new items (K-0, K-1, …), one a line after the header: row n of the file is item K-(n-2). */
function catalogue(rows: number): string {
  const file = join(tempFolder('import'), 'catalogue.csv');
  let csv = 'sku,name,price,quantity\n';
  for (let index = 0; index < rows; index++) csv += `K-${index},Kettle ${index},2.00,3\n`;
  writeFileSync(file, csv);
  return file;
}

async function upload(server: RunningServer, file: string): Promise<string> {
  const posted = await fetch(`${server.baseUrl}/v1/items/import?mode=partial`, {
    method: 'POST',
    headers: {
      'content-type': 'text/csv',
      'x-api-key': server.adminKey,
      'content-length': String(statSync(file).size),
    },
    body: createReadStream(file) as unknown as RequestInit['body'],
    duplex: 'half',
  } as RequestInit);
  expect(posted.status).toBe(202);
  return posted.headers.get('location')!;
}

/** Polls the operation until `done` holds of it (bounded: 30 s). */
async function until(server: RunningServer, location: string, done: (seen: Operation) => boolean) {
  let seen = await operationOf(server, location);
  for (let attempt = 0; attempt < 1500 && !done(seen); attempt++) {
    await pause(20);
    seen = await operationOf(server, location);
  }
  return seen;
}

/** Whether the server holds an item of `sku`. */
async function holds(server: RunningServer, sku: string): Promise<boolean> {
  const reply = await fetch(`${server.baseUrl}/v1/items?sku=${sku}`, { headers: { 'x-api-key': server.adminKey } });
  return ((await reply.json()) as { data: unknown[] }).data.length === 1;
}

/** Exactly the rows the operation says were committed (rows 2..committed_through) are stored. */
async function expectCommittedStored(server: RunningServer, ended: Operation, rows: number) {
  const committed = ended.progress.committed_through;
  expect(committed).toBeGreaterThan(1);
  expect(committed).toBeLessThan(rows + 1);
  expect(ended.summary!.rows_committed).toBe(committed - 1);
  expect(await holds(server, `K-${committed - 2}`)).toBe(true);
  expect(await holds(server, `K-${committed - 1}`)).toBe(false);
}

/** Posts `body` to `path` and waits for its operation to end (bounded: 30 s). */
async function imported(server: RunningServer, path: string, body: string): Promise<Operation> {
  const posted = await fetch(`${server.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv', 'x-api-key': server.adminKey },
    body,
  });
  expect(posted.status).toBe(202);
  return until(server, posted.headers.get('location')!, (seen) => !['queued', 'running'].includes(seen.status));
}

/** What the server's log said at start about where its imports run (its `imports` lines). */
function whereImportsRun(server: RunningServer): { imports: string; msg: string }[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.includes('"imports":'))
    .map((line) => {
      const { imports, msg } = JSON.parse(line) as { imports: string; msg: string };
      return { imports, msg };
    });
}

/** The thread asked for: the default (auto) runs imports on the event loop on PostgreSQL. */
const ON_THREAD = { ROWI_IMPORT_THREAD: 'thread' };

describe('imports on the import thread', () => {
  it(
    'POST /v1/users/import and /v1/items/stock/import: more rows than a chunk, each chunk written at once (no turn between statements on the thread): users created, then each updated with on_conflict=update; stock levels set, each with its movement',
    { timeout: 90_000 },
    async () => {
      const server = await startServer({ env: ON_THREAD });
      running.push(server);
      const count = 1_300;
      const users = Array.from({ length: count }, (_, index) => `Bulk ${index},bulk.${index}@example.com`);
      const created = await imported(server, '/v1/users/import', `name,email\n${users.join('\n')}\n`);
      expect([created.status, created.progress.rows_succeeded]).toEqual(['succeeded', count]);
      const renamed = users.map((row) => row.replace('Bulk', 'Renamed').replace('bulk.', 'BULK.'));
      const updated = await imported(
        server,
        '/v1/users/import?on_conflict=update',
        `name,email\n${renamed.join('\n')}\n`,
      );
      expect([updated.status, updated.progress.rows_succeeded]).toEqual(['succeeded', count]);
      const headers = { 'x-api-key': server.adminKey };
      for (const index of [0, 127, 128, 999, 1000, count - 1]) {
        const found = await fetch(`${server.baseUrl}/v1/users?email=bulk.${index}@example.com`, { headers });
        const [user] = ((await found.json()) as { data: { name: string; email: string }[] }).data;
        expect(user).toMatchObject({ name: `Renamed ${index}`, email: `BULK.${index}@example.com` });
      }

      const items = await imported(
        server,
        '/v1/items/import',
        `sku,name,price\n${Array.from({ length: count }, (_, index) => `S-${index},Item ${index},1.00`).join('\n')}\n`,
      );
      expect([items.status, items.progress.rows_succeeded]).toEqual(['succeeded', count]);
      const levels = await imported(
        server,
        '/v1/items/stock/import',
        `sku,quantity\n${Array.from({ length: count }, (_, index) => `S-${index},${index + 1}`).join('\n')}\n`,
      );
      expect([levels.status, levels.progress.rows_succeeded]).toEqual(['succeeded', count]);
      for (const index of [0, 128, 1000, count - 1]) {
        const found = await fetch(`${server.baseUrl}/v1/items?sku=S-${index}`, { headers });
        const [item] = ((await found.json()) as { data: { id: number }[] }).data;
        const stock = await fetch(`${server.baseUrl}/v1/items/${item!.id}/stock`, { headers });
        expect(((await stock.json()) as { quantity: number }).quantity).toBe(index + 1);
        const movements = await fetch(`${server.baseUrl}/v1/items/${item!.id}/stock/movements`, { headers });
        const [newest] = ((await movements.json()) as { data: { kind: string; quantity_after: number }[] }).data;
        expect(newest).toMatchObject({ kind: 'set', quantity_after: index + 1 });
      }
    },
  );

  it(
    "POST /v1/items/import: the thread's events reach the process's event stream, and a cancel stops the import at its next commit, keeping exactly what it says",
    { timeout: 90_000 },
    async () => {
      const server = await startServer({ env: ON_THREAD });
      running.push(server);
      const stream = new AbortController();
      const opened = await fetch(`${server.baseUrl}/v1/events/stream?types=operation.completed`, {
        headers: { 'x-api-key': server.adminKey, accept: 'text/event-stream' },
        signal: stream.signal,
      });
      expect(opened.status).toBe(200);
      const rows = 150_000;
      const location = await upload(server, catalogue(rows));
      const started = await until(server, location, (seen) => seen.progress.committed_through > 0);
      expect(started.status).toBe('running');
      const cancel = await fetch(`${server.baseUrl}${location}/cancel`, {
        method: 'POST',
        headers: { 'x-api-key': server.adminKey },
      });
      expect(cancel.status).toBe(202);
      const ended = await until(server, location, (seen) => !['queued', 'running'].includes(seen.status));
      expect(ended.status).toBe('cancelled');
      await expectCommittedStored(server, ended, rows);

      // operation.completed, committed by the thread, on the stream the main thread serves.
      const reader = opened.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      const deadline = Date.now() + 15_000;
      while (!text.includes(`"path":"/v1/operations/${ended.id}"`) && Date.now() < deadline) {
        const { value, done } = await Promise.race([
          reader.read(),
          pause(deadline - Date.now()).then(() => ({ value: undefined, done: true })),
        ]);
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      stream.abort();
      expect(text).toContain('event: operation.completed');
      expect(text).toContain(`"path":"/v1/operations/${ended.id}"`);
      expect(text).toContain('"status":"cancelled"');
    },
  );

  it(
    'POST /v1/items/import: SIGTERM while the thread imports stops the import at its next commit; rowi exits 0, and after a restart the operation is failed, keeping exactly what it says',
    { timeout: 90_000 },
    async () => {
      const first = await startServer({ env: ON_THREAD });
      running.push(first);
      const rows = 150_000;
      const location = await upload(first, catalogue(rows));
      const started = await until(first, location, (seen) => seen.progress.committed_through > 0);
      expect(started.status).toBe('running');

      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      const second = await startServer({ database: first.database, adminKey: first.adminKey, env: ON_THREAD });
      running.push(second);
      const ended = await operationOf(second, location);
      expect(ended.status).toBe('failed');
      expect(ended.summary!.detail).toMatch(/rowi stopped while the import ran/);
      await expectCommittedStored(second, ended, rows);
    },
  );

  it(
    `POST /v1/items/import: runs to its end on ${BACKEND === 'sqlite' ? 'the thread (SQLite)' : 'the event loop (PostgreSQL)'}, as rowi said when it started, when ROWI_IMPORT_THREAD is left at its default (auto)`,
    { timeout: 60_000 },
    async () => {
      const server = await startServer({ env: { ROWI_IMPORT_THREAD: '' } });
      running.push(server);
      const where = BACKEND === 'sqlite' ? 'thread' : 'main';
      expect(whereImportsRun(server)).toEqual([
        {
          imports: where,
          msg:
            where === 'thread'
              ? 'imports run on a thread of their own (ROWI_IMPORT_THREAD=auto)'
              : 'imports run on the event loop that answers requests (ROWI_IMPORT_THREAD=auto)',
        },
      ]);
      const ended = await imported(server, '/v1/items/import', `sku,name,price,quantity\nAUTO-1,Auto,1.00,4\n`);
      expect([ended.status, ended.progress.rows_succeeded]).toEqual(['succeeded', 1]);
      expect(await holds(server, 'AUTO-1')).toBe(true);
    },
  );

  // An in-memory database exists on one connection (SQLite only): the thread cannot have one of its own.
  it.runIf(BACKEND === 'sqlite')(
    'POST /v1/items/import: runs to its end on the event loop, as rowi said when it started (and why), when the thread is asked for on an in-memory database (ROWI_DATA=:memory:)',
    { timeout: 60_000 },
    async () => {
      const server = await startServer({ database: { ROWI_DATA: ':memory:' }, env: ON_THREAD });
      running.push(server);
      expect(whereImportsRun(server)).toEqual([
        {
          imports: 'main',
          msg: 'imports run on the event loop that answers requests (ROWI_IMPORT_THREAD=thread, but an in-memory database exists on its one connection only)',
        },
      ]);
      const ended = await imported(server, '/v1/items/import', `sku,name,price\nMEM-1,In memory,1.00\n`);
      expect([ended.status, ended.progress.rows_succeeded]).toEqual(['succeeded', 1]);
      expect(await holds(server, 'MEM-1')).toBe(true);
    },
  );
});
