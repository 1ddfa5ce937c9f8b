import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Files as people send them (docs/bulk.md "Imports"): what an operation says of them once it has
 * ended, counted and numbered as the file's own lines. Files streamed over a real socket, the
 * operation followed until it ends; on SQLite and PostgreSQL.
 */
let test: TestApp;
let importer: Importer;
let spool: string;
beforeAll(async () => {
  const folder = tempFolder('imports-files');
  spool = join(folder, 'spool');
  // Load shedding off: a 1 MB field read in this process may hold the event loop on a busy machine.
  test = await startApp({
    ROWI_IMPORT_DIRECTORY: spool,
    ROWI_IMPORT_MAX_BYTES: '4000000',
    ROWI_MAX_EVENT_LOOP_DELAY: '0',
  });
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

/** The row errors of an ended operation, as [row, problem]. */
const refusals = (operation: { errors: { row: number; problem: string }[] }) =>
  operation.errors.map((error) => [error.row, error.problem]);

describe('CSV: a record longer than 1 MiB', () => {
  const long = 'x'.repeat(1_100_000);

  it('POST /v1/items/import: in partial mode a quoted field over the row limit refuses its row (malformed-row) and the rows after it are read and stored', async () => {
    const csv = `sku,name,price\nLONG-1,Lathe,1.00\nLONG-2,"a ""quoted"", line\n${long}",1.00\nLONG-3,"Last, one",1.00\nLONG-4,${long},1.00\nLONG-5,Lever,1.00\n`;
    const done = await imported('items', csv, { query: '?mode=partial' });
    expect(done.status).toBe('succeeded');
    expect(done.errors).toEqual([
      { row: 3, field: null, problem: 'malformed-row', detail: 'is longer than 1048576 bytes' },
      { row: 5, field: null, problem: 'malformed-row', detail: 'is longer than 1048576 bytes' },
    ]);
    expect(await skus('LONG-')).toEqual(['LONG-1', 'LONG-3', 'LONG-5']);
    expect(done.progress).toMatchObject({ rows_read: 5, rows_succeeded: 3, rows_failed: 2, committed_through: 6 });
  });

  it('POST /v1/items/import: in atomic mode a row over the limit fails the import, nothing stored', async () => {
    const done = await imported('items', `sku,name,price\nLONG-A-1,Awl,1.00\nLONG-A-2,"${long}",1.00\n`);
    expect(done.status).toBe('failed');
    expect(refusals(done)).toEqual([[3, 'malformed-row']]);
    expect(await skus('LONG-A-')).toEqual([]);
  });

  it('POST /v1/items/import: a quoted field over the limit that never closes ends the file there (malformed-file)', async () => {
    const done = await imported(
      'items',
      `sku,name,price\nLONG-U-1,Urn,1.00\nLONG-U-2,"${long},1.00\nLONG-U-3,Ute,1.00\n`,
      {
        query: '?mode=partial',
      },
    );
    expect(done.status).toBe('failed');
    expect(refusals(done)).toEqual([[3, 'malformed-file']]);
    expect(await skus('LONG-U-')).toEqual(['LONG-U-1']);
  });

  it('POST /v1/orders/import: a line of an order over the limit refuses its whole order, and the next order is placed', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 10);
    const csv = `order,name,user_id,item_id,quantity\nO-1,"${long}",${user.id},${item.id},1\nO-1,,,${item.id},1\nO-2,Second,${user.id},${item.id},2\n`;
    const done = await imported('orders', csv, { query: '?mode=partial' });
    expect(done.status).toBe('succeeded');
    expect(refusals(done)).toEqual([[2, 'malformed-row']]);
    const orders = await test.storage.db.selectFrom('orders').select(['name']).where('user_id', '=', user.id).execute();
    expect(orders).toEqual([{ name: 'Second' }]);
  });
});

describe('CSV headers and separators as spreadsheets write them', () => {
  it('POST /v1/items/import: header names match without regard to case and surrounding spaces', async () => {
    const done = await imported('items', '\uFEFF SKU ,Name,  PRICE,Quantity\nHDR-1,Hasp,1.00,4\n');
    expect(done.status).toBe('succeeded');
    expect(await skus('HDR-')).toEqual(['HDR-1']);
  });

  it.each([
    ['semicolons', ';'],
    ['tabs', '\t'],
  ])(
    'POST /v1/{collection}/import: a file separated by %s is read, into users, items, stock and orders',
    async (_name, separator) => {
      const row = (...cells: (string | number)[]) => `${cells.join(separator)}\n`;
      const tag = separator === ';' ? 'semi' : 'tab';
      const users = await imported('users', row('Name', 'EMAIL') + row('"Ada; Countess"', `ada-${tag}@example.com`));
      expect(users.status).toBe('succeeded');
      const [user] = await test.storage.db
        .selectFrom('users')
        .select(['id', 'name'])
        .where('email', '=', `ada-${tag}@example.com`)
        .execute();
      expect(user?.name).toBe('Ada; Countess');

      const items = await imported(
        'items',
        row('SKU', 'Name', 'Price', 'Quantity') + row(`SEP-${tag}-1`, 'Sprocket', '0.40', 5),
      );
      expect(items.status).toBe('succeeded');
      const [item] = await test.storage.db.selectFrom('items').select('id').where('sku', '=', `SEP-${tag}-1`).execute();

      const stock = await imported('items/stock', row('SKU', 'Quantity') + row(`SEP-${tag}-1`, 9));
      expect(stock.status).toBe('succeeded');
      const [level] = await test.storage.db
        .selectFrom('stock')
        .select('quantity')
        .where('item_id', '=', item!.id)
        .execute();
      expect(level?.quantity).toBe(9);

      const orders = await imported(
        'orders',
        row('Order', 'User_ID', 'Item_ID', 'Quantity') + row(`SO-${tag}`, user!.id, item!.id, 2),
      );
      expect(orders.status).toBe('succeeded');
      expect(orders.summary.rows_committed).toBe(1);
    },
  );

  it.each([
    ['sku|name|price\nSEP-P-1|Pin|1.00\n', 'separated by "|", which rowi does not read'],
    ['SEP-D-1,Dowel,1.00\n', 'the first row ("SEP-D-1,Dowel,1.00") names none of the columns'],
    ['SKU,name,price,sku\n', 'names the column sku a second time'],
  ])('POST /v1/items/import: 422 import-invalid saying what is wrong with the header row %j', async (text, says) => {
    const reply = await importer.upload('items', text);
    expectProblem(reply, 422, 'import-invalid');
    expect(reply.json.detail).toContain(says);
    expect(reply.json.detail).not.toContain('the header row is missing');
  });
});

describe('uploads with a Content-Encoding', () => {
  /** Sends `body` as the import file of `collection`, with these headers, over a real socket. */
  async function send(collection: string, body: Buffer, headers: Record<string, string>, query = '') {
    const response = await fetch(`${importer.base}/v1/${collection}/import${query}`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv', 'x-api-key': test.adminKey, ...headers },
      body,
    });
    const text = await response.text();
    return { status: response.status, headers: Object.fromEntries(response.headers), text, json: JSON.parse(text) };
  }

  it.each([
    ['gzip', gzipSync],
    ['x-gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ])('POST /v1/items/import: a file sent with Content-Encoding: %s is decoded and imported', async (coding, encode) => {
    const csv = `sku,name,price\nENC-${coding}-1,Gasket,1.00\nENC-${coding}-2,Gland,2.00\n`;
    const reply = await send('items', encode(Buffer.from(csv)), { 'content-encoding': coding });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.json.progress.bytes_total).toBe(Buffer.byteLength(csv));
    const done = (await importer.finished(reply.headers.location as string)).json;
    expect(done.status).toBe('succeeded');
    expect(await skus(`ENC-${coding}-`)).toEqual([`ENC-${coding}-1`, `ENC-${coding}-2`]);
  });

  it('POST /v1/items/import: 413 import-too-large for a small gzip file that inflates past ROWI_IMPORT_MAX_BYTES (a zip bomb), refused without filling the disk', async () => {
    const bomb = gzipSync(Buffer.from(`sku,name,price\nBOMB-1,"${'x'.repeat(60_000_000)}",1.00\n`));
    expect(bomb.length).toBeLessThan(200_000);
    const started = Date.now();
    const reply = await send('items', bomb, { 'content-encoding': 'gzip' });
    expect(reply.status).toBe(413);
    expect(reply.json.type).toBe('/problems/import-too-large');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(readdirSync(spool).filter((name) => name.endsWith('.upload'))).toEqual([]);
    expect(await skus('BOMB-')).toEqual([]);
  });

  it.each([
    ['zstd', 'zstd'],
    ['compress', 'compress'],
    ['gzip, br', 'gzip, br'],
  ])(
    'POST /v1/items/import: 415 naming the encodings taken (Accept-Encoding) for Content-Encoding: %s',
    async (coding) => {
      const reply = await send('items', Buffer.from('sku,name,price\nENC-Z-1,X,1.00\n'), {
        'content-encoding': coding,
      });
      expect(reply.status).toBe(415);
      expect(reply.json.type).toBe('/problems/unsupported-media-type');
      expect(reply.json.detail).toContain('gzip, deflate, br');
      expect(reply.headers['accept-encoding']).toBe('gzip, deflate, br');
      expect(await skus('ENC-Z-')).toEqual([]);
    },
  );

  it('POST /v1/items/import: 400 malformed-body, not a NUL byte at byte 4, when the file is not the gzip its Content-Encoding says', async () => {
    const plain = await send('items', Buffer.from('sku,name,price\nENC-P-1,P,1.00\n'), { 'content-encoding': 'gzip' });
    expect(plain.status).toBe(400);
    expect(plain.json.type).toBe('/problems/malformed-body');
    expect(plain.json.detail).toContain('not gzip data');
    const cut = gzipSync(Buffer.from(`sku,name,price\n${'ENC-C-1,C,1.00\n'.repeat(1000)}`));
    const truncated = await send('items', cut.subarray(0, cut.length - 20), { 'content-encoding': 'gzip' });
    expect(truncated.status).toBe(400);
    expect(truncated.json.type).toBe('/problems/malformed-body');
    expect(await skus('ENC-')).not.toContain('ENC-C-1');
  });

  it('POST /v1/items/import: a gzip file sent without Content-Encoding is still refused as not text (422 naming the NUL byte)', async () => {
    const reply = await send('items', gzipSync(Buffer.from('sku,name,price\nENC-N-1,N,1.00\n')), {});
    expect(reply.status).toBe(422);
    expect(reply.json.type).toBe('/problems/import-invalid');
  });
});

describe('an import folder that fails under a running rowi', () => {
  it('POST /v1/items/import: 503 service-unavailable with Retry-After at once, nothing kept, when the import folder cannot be written (the start checks it; here it failed later)', async () => {
    const folder = tempFolder('spool-gone');
    writeFileSync(join(folder, 'a-file'), 'not a folder');
    const broken = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'a-file', 'spool') });
    try {
      const other = new Importer(broken, await broken.app.listen({ host: '127.0.0.1', port: 0 }), folder);
      const reply = await other.upload('items', 'sku,name,price\nGONE-1,Gone,1.00\n');
      expectProblem(reply, 503, 'service-unavailable');
      expect(reply.headers['retry-after']).toBe('30');
      expect(reply.json.detail).toContain('ROWI_IMPORT_DIRECTORY');
      expect(await broken.storage.db.selectFrom('operations').select('id').execute()).toEqual([]);
    } finally {
      await broken.close();
    }
  });
});
