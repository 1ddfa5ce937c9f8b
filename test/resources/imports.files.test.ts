import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { createItem, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Files as people send them (docs/bulk.md "Imports"): what an operation says of them once it has
 * ended, counted and numbered as the file's own lines. Files streamed over a real socket, the
 * operation followed until it ends; on SQLite and PostgreSQL.
 */
let test: TestApp;
let importer: Importer;
beforeAll(async () => {
  const folder = tempFolder('imports-files');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool'), ROWI_IMPORT_MAX_BYTES: '4000000' });
  importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
});
afterAll(() => test.close());

const skus = async (prefix: string) =>
  (
    await test.storage.db.selectFrom('items').select('sku').where('sku', 'like', `${prefix}%`).orderBy('sku').execute()
  ).map((item) => item.sku);

/** Uploads `text` to `collection` and answers the operation once it has ended. */
async function imported(collection: string, text: string, options: { type?: string; query?: string } = {}) {
  const reply = await importer.upload(collection, text, options);
  expect(reply.status, reply.text).toBe(202);
  return (await importer.finished(reply.headers.location as string)).json;
}

describe('counts in words', () => {
  it('POST /v1/items/import: the summary counts 1 row in the singular, and numbers a CSV file of 500 records as rows 2 to 501 (row 1 its header)', async () => {
    const one = await imported('items', 'sku,name,price\nSUM-1,One,1.00\n');
    expect(one.summary.detail).toBe('1 row stored, 0 skipped, 0 refused.');
    expect(one.summary.committed).toBe(
      "The file's rows 2 to 2 were committed (row 1 is its header); no later row was.",
    );

    const rows = Array.from({ length: 500 }, (_, index) => `SUM-B-${index},Bolt,1.00`);
    const many = await imported('items', `sku,name,price\n${rows.join('\n')}\n`);
    expect(many.summary).toEqual({
      detail: '500 rows stored, 0 skipped, 0 refused.',
      rows_committed: 500,
      committed: "The file's rows 2 to 501 were committed (row 1 is its header); no later row was.",
    });
    expect(many.progress.committed_through).toBe(501);
  });

  it('POST /v1/items/import: an NDJSON file is numbered by its lines, and 1 refused row is said in the singular', async () => {
    const ndjson = `{"sku":"SUM-N-1","name":"Nut","price":"1.00"}\n{"sku":"SUM-N-2","name":"Nib","price":"1.00"}\n`;
    const done = await imported('items', ndjson, { type: 'application/x-ndjson' });
    expect(done.summary.committed).toBe("The file's rows (lines) 1 to 2 were committed; no later row was.");

    const atomic = await imported('items', 'sku,name,price\nSUM-A-1,Awl,1.00\nSUM-A-2,Axe,not a price\n');
    expect(atomic.status).toBe('failed');
    expect(atomic.summary.detail).toBe('1 row was refused, so nothing was stored (mode=atomic).');
    const dry = await imported('items', 'sku,name,price\nSUM-D-1,Die,1.00\n', { query: '?dry_run=true' });
    expect(dry.summary.detail).toBe('Dry run: 1 row would be stored; nothing was stored.');
    expect(await skus('SUM-A-')).toEqual([]);
  });

  it('POST /v1/items/stock/batch: an adjust refused counts 1 unit in the singular', async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 1);
    const reply = await test.call({
      method: 'POST',
      url: '/v1/items/stock/batch',
      body: { adjust: [{ item_id: item.id, by: -2 }] },
    });
    expect(reply.status).toBe(409);
    expect(reply.json.failed_entry.detail).toContain(`Item ${item.id} has 1 unit on hand (not reserved)`);
  });
});
