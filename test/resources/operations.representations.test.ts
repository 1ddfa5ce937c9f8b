import { XMLParser } from 'fast-xml-parser';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import { BACKEND } from '../helpers/database.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Operations, backups and imports answer as every resource does (README, docs/guide.md
 * "Representations"): JSON or XML as Accept asks, `fields=` keeping `id`; the refused rows of an
 * operation as NDJSON by default, or as one JSON or XML document when Accept asks for it.
 */
const XML = { accept: 'application/xml' };
const parse = (text: string) => new XMLParser({ parseTagValue: false }).parse(text) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let test: TestApp;
let importer: Importer;
let failed: string;
beforeAll(async () => {
  const folder = tempFolder('operation-formats');
  test = await startApp({
    ROWI_IMPORT_DIRECTORY: join(folder, 'spool'),
    ...(BACKEND === 'sqlite' ? { ROWI_BACKUP_DIR: join(folder, 'backups') } : {}),
    ROWI_MAX_EVENT_LOOP_DELAY: '0',
  });
  importer = new Importer(test, await listenOnLoopback(test), folder);
  const upload = await importer.upload('items', 'sku,name,price\nOF-1,Good,1.00\nOF-2,Bad,abc\n', {
    query: '?mode=partial',
  });
  expect(upload.status).toBe(202);
  failed = upload.headers.location as string;
  expect((await importer.finished(failed)).json.progress.rows_failed).toBe(1);
});
afterAll(() => test.close());

describe('operations in XML', () => {
  it('GET /v1/operations/{id}: 200 in XML, the import whole (its options, progress, summary and first errors) when Accept asks for XML', async () => {
    const json = (await test.call({ url: failed })).json;
    const reply = await test.call({ url: failed, headers: XML });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    const { operation } = parse(reply.text);
    expect(operation).toMatchObject({
      id: String(json.id),
      kind: 'import',
      target: 'items',
      options: { mode: 'partial', on_conflict: 'error', dry_run: 'false' },
      progress: { rows_read: '2', rows_succeeded: '1', rows_failed: '1' },
      summary: { rows_committed: '1' },
      errors: { error: { row: '3', field: 'price', problem: 'validation-failed' } },
      errors_url: `${failed}/errors`,
    });
  });

  it('GET /v1/operations: 200 in XML, a page of <operation> elements under <operations> when Accept asks for XML', async () => {
    const reply = await test.call({ url: '/v1/operations?kind=import', headers: XML });
    expect(reply.status).toBe(200);
    const { operations } = parse(reply.text);
    expect([operations.data.operation].flat().map((each: { kind: string }) => each.kind)).toContain('import');
    expect(operations.next_cursor).toBeDefined();
  });

  it('POST /v1/operations/{id}/cancel: 409 operation-finished as an XML problem when Accept asks for XML', async () => {
    const reply = await test.call({ method: 'POST', url: `${failed}/cancel`, headers: XML });
    expect(reply.status).toBe(409);
    expect(reply.mediaType).toBe('application/problem+xml');
    expect(reply.text).toContain('<type>/problems/operation-finished</type>');
  });

  it('POST /v1/items/import: 202 with the queued operation in XML when Accept asks for XML', async () => {
    const reply = await fetch(`${importer.base}/v1/items/import`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv', 'x-api-key': test.adminKey, accept: 'application/xml' },
      body: 'sku,name,price\nOF-3,Three,3.00\n',
    });
    expect(reply.status).toBe(202);
    expect(reply.headers.get('content-type')).toMatch(/^application\/xml/);
    const { operation } = parse(await reply.text());
    expect(operation).toMatchObject({ kind: 'import', target: 'items', status: 'queued' });
    await importer.finished(reply.headers.get('location')!);
  });
});

describe('the refused rows of an operation', () => {
  it('GET /v1/operations/{id}/errors: 200 one XML document, <errors><data><error>…, when Accept asks for XML', async () => {
    const reply = await test.call({ url: `${failed}/errors`, headers: XML });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(parse(reply.text).errors.data.error).toMatchObject({
      row: '3',
      field: 'price',
      problem: 'validation-failed',
    });
  });

  it('GET /v1/operations/{id}/errors: 200 one JSON document {"data": [...]} when Accept asks for JSON (the typed client does)', async () => {
    const reply = await test.call({ url: `${failed}/errors`, headers: { accept: 'application/json' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual({
      data: [expect.objectContaining({ row: 3, field: 'price', problem: 'validation-failed' })],
    });
  });

  it('GET /v1/operations/{id}/errors: 406 naming the three media types it has when Accept allows none of them', async () => {
    const problem = expectProblem(
      await test.call({ url: `${failed}/errors`, headers: { accept: 'text/csv' } }),
      406,
      'not-acceptable',
    );
    expect(problem.available_media_types).toEqual(['application/x-ndjson', 'application/json', 'application/xml']);
  });

  it('GET /v1/operations/{id}/errors: {"data":[]} and <errors><data/></errors>... for an operation that refused no row', async () => {
    // A dry run: it stores nothing, so the other tests' records stay as they are.
    const upload = await importer.upload('items', 'sku,name,price\nOF-CLEAN-1,Good,1.00\n', { query: '?dry_run=true' });
    const location = upload.headers.location as string;
    await importer.finished(location);
    expect((await test.call({ url: `${location}/errors`, headers: { accept: 'application/json' } })).json).toEqual({
      data: [],
    });
    const xml = await test.call({ url: `${location}/errors`, headers: XML });
    expect(xml.text).toBe('<?xml version="1.0" encoding="UTF-8"?>\n<errors><data></data></errors>');
    expect((await test.call({ url: `${location}/errors` })).text).toBe('');
  });

  it('GET /v1/operations/{id}/errors: 200 NDJSON, a refused row a line, when Accept allows it or is absent', async () => {
    for (const accept of [undefined, 'application/x-ndjson', 'application/jsonl', '*/*']) {
      const reply = await test.call({ url: `${failed}/errors`, ...(accept ? { headers: { accept } } : {}) });
      expect(reply.status, accept).toBe(200);
      expect(reply.mediaType).toBe('application/x-ndjson');
      expect(
        reply.text
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line).row),
      ).toEqual([3]);
    }
  });

  it('HEAD /v1/operations/{id}/errors: 200 with the media type of GET and no Content-Length (the length is known only once streamed)', async () => {
    const reply = await test.call({ method: 'HEAD', url: `${failed}/errors` });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/x-ndjson');
    expect(reply.headers['content-length']).toBeUndefined();
    expect(reply.text).toBe('');
  });
});

describe('fields on operations', () => {
  it('GET /v1/operations?fields=status: each operation has its id and status only', async () => {
    const reply = await test.call({ url: '/v1/operations?fields=status' });
    expect(reply.status).toBe(200);
    expect(reply.json.data.length).toBeGreaterThan(0);
    for (const operation of reply.json.data) expect(Object.keys(operation).sort()).toEqual(['id', 'status']);
  });

  it('GET /v1/operations/{id}?fields=progress.rows_failed: the id and that member only, in JSON and in XML', async () => {
    const reply = await test.call({ url: `${failed}?fields=progress.rows_failed` });
    expect(reply.json).toEqual({ id: Number(failed.split('/').at(-1)), progress: { rows_failed: 1 } });
    const xml = parse((await test.call({ url: `${failed}?fields=progress.rows_failed`, headers: XML })).text);
    expect(xml.operation).toEqual({ id: failed.split('/').at(-1), progress: { rows_failed: '1' } });
  });
});

describe.skipIf(BACKEND !== 'sqlite')('backups in XML, and their operation', () => {
  let operation: string;
  beforeAll(async () => {
    const started = await test.call({ method: 'POST', url: '/v1/backups', headers: XML });
    expect(started.status).toBe(202);
    expect(started.mediaType).toBe('application/xml');
    expect(parse(started.text).operation).toMatchObject({ kind: 'backup', status: 'queued' });
    operation = started.headers.location as string;
    expect((await importer.finished(operation)).json.status).toBe('succeeded');
  });

  it('GET /v1/operations/{id}: 200 in XML, the backup operation with the backup it wrote (file, SHA-256, rows)', async () => {
    const json = (await test.call({ url: operation })).json;
    const { operation: xml } = parse((await test.call({ url: operation, headers: XML })).text);
    expect(xml).toMatchObject({
      kind: 'backup',
      status: 'succeeded',
      summary: {
        backup: { file: json.summary.backup.file, sha256: json.summary.backup.sha256, rows: { items: '2' } },
        problem: '',
      },
    });
  });

  it('GET /v1/operations/{id}?fields=summary.backup.file: the id and the file of the backup it wrote', async () => {
    const json = (await test.call({ url: operation })).json;
    const reply = await test.call({ url: `${operation}?fields=summary.backup.file` });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ id: json.id, summary: { backup: { file: json.summary.backup.file } } });
  });

  it('GET /v1/backups and GET /v1/backups/{name}: 200 in XML, <backups> of <backup> elements and one <backup>', async () => {
    const file = (await test.call({ url: operation })).json.summary.backup.file as string;
    const list = await test.call({ url: '/v1/backups', headers: XML });
    expect(list.status).toBe(200);
    expect(parse(list.text).backups.data.backup).toMatchObject({ file, url: `/v1/backups/${file}` });
    const one = await test.call({ url: `/v1/backups/${file}`, headers: XML });
    expect(one.status).toBe(200);
    expect(parse(one.text).backup).toMatchObject({ file, rows: { items: '2' } });
  });
});
