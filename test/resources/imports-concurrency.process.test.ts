import { createReadStream, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sendAlone, startServer, workersThatAnswered, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * ROWI_IMPORT_CONCURRENCY across processes (docs/bulk.md "Imports"): two rowi instances on one
 * database (a SQLite file, or a PostgreSQL schema in the process-postgres project), the cap at 1.
 * Three imports are uploaded while the first runs: one to the other instance by the same caller
 * (the cap per caller), one to each by another caller (the cap of the deployment). Each process
 * runs only the files it holds, so only the count in the database can keep them apart: each
 * import starts only after the one before it ended.
 */
const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
});

/**
 * Rows of the first import (long enough to upload the others while it runs: 2 to 12 s at 3 to 20k
 * rows a second, the uploads below take well under one), and of the others.
 */
const FIRST_ROWS = 40_000;
const ROWS = 2_000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Operation {
  status: string;
  started_at: string | null;
  finished_at: string | null;
  progress: { committed_through: number; rows_succeeded: number };
}

async function json<T>(server: RunningServer, key: string, method: string, path: string, body?: unknown) {
  const reply = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: reply.status, body: (await reply.json()) as T };
}

/** A catalogue of `rows` new items (SKUs starting `prefix`), written to a file. */
function catalogue(prefix: string, rows: number): string {
  const file = join(tempFolder('concurrency'), `${prefix}.csv`);
  let csv = 'sku,name,price,quantity\n';
  for (let index = 0; index < rows; index++) csv += `${prefix}-${index},Item ${index},1.00,2\n`;
  writeFileSync(file, csv);
  return file;
}

/** Posts `file` as a streamed upload; the operation's location. */
async function upload(server: RunningServer, key: string, file: string): Promise<string> {
  const posted = await fetch(`${server.baseUrl}/v1/items/import?mode=partial`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv', 'x-api-key': key, 'content-length': String(statSync(file).size) },
    body: createReadStream(file) as unknown as RequestInit['body'],
    duplex: 'half',
  } as RequestInit);
  expect(posted.status).toBe(202);
  return posted.headers.get('location')!;
}

describe('the import concurrency cap across processes', () => {
  it(
    'POST /v1/items/import: with ROWI_IMPORT_CONCURRENCY=1 on two instances of one database, an import starts only after the running one ended, for its caller and for another caller',
    { timeout: 90_000 },
    async () => {
      const settings = (name: string) => ({
        ROWI_IMPORT_CONCURRENCY: '1',
        ROWI_IMPORT_DIRECTORY: join(tempFolder(`spool-${name}`), 'files'),
      });
      const first = await startServer({ env: settings('first'), timeoutMs: 60_000 });
      servers.push(first);
      const second = await startServer({
        database: first.database,
        adminKey: first.adminKey,
        env: settings('second'),
        timeoutMs: 60_000,
      });
      servers.push(second);
      const admin = first.adminKey;
      const caller = await json<{ id: number }>(first, admin, 'POST', '/v1/callers', { name: 'loader', role: 'admin' });
      expect(caller.status).toBe(201);
      const key = await json<{ key: string }>(first, admin, 'POST', `/v1/callers/${caller.body.id}/keys`, {});
      expect(key.status).toBe(201);
      const other = key.body.key;

      const [a, b, c, d] = [
        catalogue('A', FIRST_ROWS),
        catalogue('B', ROWS),
        catalogue('C', ROWS),
        catalogue('D', ROWS),
      ];
      const running = await upload(first, admin, a!);
      let seen = (await json<Operation>(first, admin, 'GET', running)).body;
      for (let attempt = 0; attempt < 300 && seen.progress.committed_through === 0; attempt++) {
        await pause(20);
        seen = (await json<Operation>(first, admin, 'GET', running)).body;
      }
      expect(seen.status).toBe('running');
      const [atB, atC, atD] = await Promise.all([
        upload(second, admin, b!),
        upload(second, other, c!),
        upload(first, other, d!),
      ]);
      const accepted = Date.now();
      const uploads = [
        { server: first, key: admin, location: running, rows: FIRST_ROWS },
        { server: second, key: admin, location: atB, rows: ROWS },
        { server: second, key: other, location: atC, rows: ROWS },
        { server: first, key: other, location: atD, rows: ROWS },
      ];

      const ended: Operation[] = [];
      for (const { server, key: credential, location, rows } of uploads) {
        let operation = (await json<Operation>(server, credential, 'GET', location)).body;
        for (let attempt = 0; attempt < 600 && ['queued', 'running'].includes(operation.status); attempt++) {
          await pause(100);
          operation = (await json<Operation>(server, credential, 'GET', location)).body;
        }
        expect(operation.status).toBe('succeeded');
        expect(operation.progress.rows_succeeded).toBe(rows);
        ended.push(operation);
      }
      // The others were accepted while the first ran (its end is after): had the cap not held, they would have run alongside it.
      expect(Date.parse(ended[0]!.finished_at!)).toBeGreaterThan(accepted);
      const spans = ended
        .map((operation) => ({ start: Date.parse(operation.started_at!), end: Date.parse(operation.finished_at!) }))
        .sort((a, b) => a.start - b.start);
      for (let index = 1; index < spans.length; index++)
        expect(spans[index]!.start).toBeGreaterThanOrEqual(spans[index - 1]!.end);
    },
  );
});

interface Answer {
  status: number;
  location: string | undefined;
  retryAfter: string | undefined;
  body: { type?: string; status?: string; started_at?: string | null };
}

/** Posts `file` on a connection of its own (dealt to the next worker). */
async function uploadAlone(server: RunningServer, key: string, file: string): Promise<Answer> {
  const headers = { 'content-type': 'text/csv', 'x-api-key': key, 'content-length': String(statSync(file).size) };
  const reply = await sendAlone(server, 'POST', '/v1/items/import?mode=partial', headers, createReadStream(file));
  return {
    status: reply.status,
    location: reply.headers.location,
    retryAfter: reply.headers['retry-after'],
    body: JSON.parse(reply.text) as Answer['body'],
  };
}

describe('the import queue of rowi serve --workers 2', () => {
  it(
    "POST /v1/items/import: a second caller's one-row import runs before the first caller's backlog, the caller's queue is capped (429) and every file's bytes are capped (507), when the uploads reach both workers",
    { timeout: 120_000 },
    async () => {
      const server = await startServer({
        args: ['--workers', '2'],
        env: {
          ROWI_IMPORT_CONCURRENCY: '1',
          ROWI_IMPORT_QUEUE_MAX: '3',
          ROWI_IMPORT_SPOOL_BYTES: '1500000',
          ROWI_IMPORT_DIRECTORY: join(tempFolder('spool-workers'), 'files'),
        },
        timeoutMs: 60_000,
      });
      servers.push(server);
      const admin = server.adminKey;
      const caller = await json<{ id: number }>(server, admin, 'POST', '/v1/callers', {
        name: 'second',
        role: 'editor',
      });
      const other = (await json<{ key: string }>(server, admin, 'POST', `/v1/callers/${caller.body.id}/keys`, {})).body
        .key;

      const first = await uploadAlone(server, admin, catalogue('W0', FIRST_ROWS));
      expect(first.status).toBe(202);
      let seen = (await json<Operation>(server, admin, 'GET', first.location!)).body;
      for (let attempt = 0; attempt < 300 && seen.progress.committed_through === 0; attempt++) {
        await pause(20);
        seen = (await json<Operation>(server, admin, 'GET', first.location!)).body;
      }
      expect(seen.status).toBe('running');
      const backlog: Answer[] = [];
      for (const name of ['W1', 'W2', 'W3']) backlog.push(await uploadAlone(server, admin, catalogue(name, ROWS)));
      expect(backlog.map((answer) => answer.status)).toEqual([202, 202, 202]);
      // The fourth waiting import of the first caller, on whichever worker: its queue is full.
      const refused = await uploadAlone(server, admin, catalogue('W4', 10));
      expect(refused).toMatchObject({ status: 429, retryAfter: '30', body: { type: '/problems/import-queue-full' } });
      const second = await uploadAlone(server, other, catalogue('X1', 1));
      expect(second.status).toBe(202);
      // 1.06 MB running and about 0.14 MB waiting: 0.79 MB more would pass 1,500,000 bytes.
      const tooMuch = await uploadAlone(server, other, catalogue('X2', 30_000));
      expect(tooMuch).toMatchObject({ status: 507, retryAfter: '60', body: { type: '/problems/import-spool-full' } });
      expect((await json<Operation>(server, admin, 'GET', first.location!)).body.status).toBe('running');
      expect(workersThatAnswered(server, 202)).toEqual(new Set([1, 2]));

      const ended = async (location: string, key: string) => {
        let operation = (await json<Operation>(server, key, 'GET', location)).body;
        for (let attempt = 0; attempt < 900 && ['queued', 'running'].includes(operation.status); attempt++) {
          await pause(100);
          operation = (await json<Operation>(server, key, 'GET', location)).body;
        }
        expect(operation.status).toBe('succeeded');
        return Date.parse(operation.started_at!);
      };
      const theirs = await ended(second.location!, other);
      const backlogStarts = await Promise.all(backlog.map((answer) => ended(answer.location!, admin)));
      for (const start of backlogStarts) expect(theirs).toBeLessThan(start);
    },
  );
});
