import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';
import { storedOperationCount } from '../helpers/stored.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The import queue's bounds and turns (docs/bulk.md "Queue and turns"), on the run's database: what
 * one caller may have waiting (count and bytes, 429), what every waiting or running file may hold
 * together (507), and whose import a free turn goes to. Files streamed over a real socket; an
 * import "running elsewhere" (a row of another process, whose lease does not run out) holds the
 * turn where a test needs imports to stay queued.
 */
let test: TestApp | undefined;
afterEach(async () => {
  await test?.close();
  test = undefined;
});

interface Started {
  test: TestApp;
  importer: Importer;
  spool: string;
}

async function start(settings: Record<string, string>): Promise<Started> {
  const folder = tempFolder('imports-queue');
  const spool = join(folder, 'spool');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: spool, ...settings });
  return { test, importer: new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder), spool };
}

/** An import of another process, running, that keeps its turn (its lease never runs out), its file `bytes` long. */
async function runningElsewhere(app: TestApp, bytes = 1): Promise<number> {
  const now = new Date().toISOString();
  const row = await app.storage.db
    .insertInto('operations')
    .values({
      kind: 'import',
      target: 'items',
      status: 'running',
      media_type: 'text/csv',
      mode: 'partial',
      on_conflict: 'error',
      dry_run: 0,
      created_by: null,
      caller_name: 'a subject elsewhere',
      request_id: 'elsewhere',
      holder: 'another-process',
      lease_until: '9999-12-31T00:00:00.000Z',
      bytes_total: bytes,
      version: 1,
      created_at: now,
      updated_at: now,
      started_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(row.id);
}

/** The files in the spool folder (an upload refused leaves none behind). */
const spooled = (spool: string) => (existsSync(spool) ? readdirSync(spool) : []);

/** A CSV file of `rows` new items with SKUs starting `prefix`, padded to `bytes` when given. */
function catalogue(prefix: string, rows: number, bytes?: number): string {
  let csv = 'sku,name,price\n';
  for (let index = 0; index < rows; index++) csv += `${prefix}-${index},Item ${index},1.00\n`;
  if (bytes !== undefined) csv += `${prefix}-pad,${'x'.repeat(Math.max(1, bytes - csv.length - 7))},1.00\n`;
  return csv;
}

/** Posts `text` with its Content-Length (fetch sends one for a string): refused before it is read. */
async function declaredUpload(started: Started, text: string, key: string) {
  const response = await fetch(`${started.importer.base}/v1/items/import?mode=partial`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv', 'x-api-key': key },
    body: text,
  });
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    text: await response.clone().text(),
    json: (await response.json()) as unknown,
    mediaType: (response.headers.get('content-type') ?? '').split(';')[0]!,
  };
}

describe('what one caller may have waiting', () => {
  it("POST /v1/items/import: 429 import-queue-full with Retry-After, nothing kept, when the caller already has ROWI_IMPORT_QUEUE_MAX imports waiting; another caller's upload is taken", async () => {
    const started = await start({ ROWI_IMPORT_CONCURRENCY: '1', ROWI_IMPORT_QUEUE_MAX: '2' });
    const { importer, spool } = started;
    await runningElsewhere(started.test);
    const other = await createCallerWithKey(started.test, { role: 'editor' });
    for (const name of ['Q1', 'Q2']) expect((await importer.upload('items', catalogue(name, 1))).status).toBe(202);
    const before = await storedOperationCount(started.test);

    const refused = await importer.upload('items', catalogue('Q3', 1));
    const problem = expectProblem(refused, 429, 'import-queue-full');
    expect(problem).toMatchObject({ queued: 2, max_queued: 2 });
    expect(refused.headers['retry-after']).toBe('30');
    const declared = await declaredUpload(started, catalogue('Q4', 1), started.test.adminKey);
    expectProblem(declared, 429, 'import-queue-full');
    expect(await storedOperationCount(started.test)).toBe(before);
    expect(spooled(spool)).toHaveLength(2);

    expect((await importer.upload('items', catalogue('O1', 1), { key: other.key })).status).toBe(202);
  });

  it('POST /v1/items/import: 429 import-queue-full when the waiting files and this one would pass ROWI_IMPORT_QUEUE_BYTES, 413 import-too-large when the file alone is larger, nothing kept, whether the Content-Length said so or the bytes did', async () => {
    const started = await start({ ROWI_IMPORT_CONCURRENCY: '1', ROWI_IMPORT_QUEUE_BYTES: '3000' });
    const { importer, spool } = started;
    await runningElsewhere(started.test);
    expect((await importer.upload('items', catalogue('B1', 1, 1400))).status).toBe(202);
    expect((await importer.upload('items', catalogue('B2', 1, 1400))).status).toBe(202);
    const before = await storedOperationCount(started.test);

    // Streamed (no Content-Length): refused as the bytes pass the room left.
    const streamed = await importer.upload('items', catalogue('B3', 1, 400));
    expect(expectProblem(streamed, 429, 'import-queue-full')).toMatchObject({ queued: 2, max_queued_bytes: 3000 });
    const declared = await declaredUpload(started, catalogue('B4', 1, 400), started.test.adminKey);
    expectProblem(declared, 429, 'import-queue-full');
    const other = await createCallerWithKey(started.test, { role: 'editor' });
    const alone = await importer.upload('items', catalogue('B5', 1, 3500), { key: other.key });
    expect(expectProblem(alone, 413, 'import-too-large')).toMatchObject({ max_bytes: 3000 });
    expect(alone.json.detail).toContain('ROWI_IMPORT_QUEUE_BYTES');
    expect(await storedOperationCount(started.test)).toBe(before);
    expect(spooled(spool)).toHaveLength(2);
  });
});

describe('what every waiting file may hold together', () => {
  it('POST /v1/items/import: 507 import-spool-full with Retry-After, nothing kept, when the files of every waiting or running import and this one would pass ROWI_IMPORT_SPOOL_BYTES; a file that fits is taken', async () => {
    const started = await start({ ROWI_IMPORT_CONCURRENCY: '1', ROWI_IMPORT_SPOOL_BYTES: '5000' });
    const { importer, spool } = started;
    await runningElsewhere(started.test, 3000);
    const other = await createCallerWithKey(started.test, { role: 'editor' });
    expect((await importer.upload('items', catalogue('S1', 1, 1500))).status).toBe(202);
    const before = await storedOperationCount(started.test);

    const refused = await importer.upload('items', catalogue('S2', 1, 800), { key: other.key });
    expectProblem(refused, 507, 'import-spool-full');
    expect(refused.headers['retry-after']).toBe('60');
    expectProblem(await declaredUpload(started, catalogue('S3', 1, 800), other.key), 507, 'import-spool-full');
    expect(await storedOperationCount(started.test)).toBe(before);
    expect(spooled(spool)).toHaveLength(1);

    expect((await importer.upload('items', catalogue('S4', 1, 400), { key: other.key })).status).toBe(202);
  });
});

interface Ended {
  status: string;
  started_at: string;
  finished_at: string;
}

describe('whose import a free turn goes to', () => {
  it("POST /v1/items/import: a second caller's one-row import runs before the rest of the first caller's backlog, when the first caller queued several", async () => {
    const started = await start({ ROWI_IMPORT_CONCURRENCY: '1' });
    const { importer } = started;
    const elsewhere = await runningElsewhere(started.test);
    const other = await createCallerWithKey(started.test, { role: 'editor' });
    const backlog: string[] = [];
    for (const name of ['F1', 'F2', 'F3'])
      backlog.push(String((await importer.upload('items', catalogue(name, 50))).headers.location));
    const second = String((await importer.upload('items', catalogue('G1', 1), { key: other.key })).headers.location);

    // The turn is free again: the import elsewhere ended.
    await started.test.storage.db
      .updateTable('operations')
      .set({ status: 'succeeded', finished_at: new Date().toISOString(), lease_until: null })
      .where('id', '=', elsewhere)
      .execute();
    const [first, secondFromFirst, third] = await Promise.all(
      backlog.map(async (location) => (await importer.finished(location)).json as Ended),
    );
    const theirs = (await importer.finished(second, other.key)).json as Ended;
    for (const ended of [first, secondFromFirst, third, theirs]) expect(ended!.status).toBe('succeeded');
    const order = [
      ['F1', first!],
      ['F2', secondFromFirst!],
      ['F3', third!],
      ['G1', theirs],
    ]
      .sort(([, a], [, b]) => Date.parse((a as Ended).started_at) - Date.parse((b as Ended).started_at))
      .map(([name]) => name);
    expect(order).toEqual(['F1', 'G1', 'F2', 'F3']);
  });

  it("POST /v1/items/import: one caller's second import waits while its first runs though a turn is free, and another caller's import takes that turn, when ROWI_IMPORT_CALLER_CONCURRENCY is 1", async () => {
    const started = await start({ ROWI_IMPORT_CONCURRENCY: '2', ROWI_IMPORT_MAX_BYTES: '4000000' });
    const { importer } = started;
    const other = await createCallerWithKey(started.test, { role: 'editor' });
    const long = String((await importer.upload('items', catalogue('L1', 15_000))).headers.location);
    const next = String((await importer.upload('items', catalogue('L2', 1))).headers.location);
    const theirs = String((await importer.upload('items', catalogue('M1', 1), { key: other.key })).headers.location);
    const [first, second] = [
      (await importer.finished(long)).json as Ended,
      (await importer.finished(next)).json as Ended,
    ];
    const another = (await importer.finished(theirs, other.key)).json as Ended;
    expect([first.status, second.status, another.status]).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(Date.parse(second.started_at)).toBeGreaterThanOrEqual(Date.parse(first.finished_at));
    expect(Date.parse(another.started_at)).toBeLessThan(Date.parse(first.finished_at));
  });
});
