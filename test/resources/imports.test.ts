import { createReadStream, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Imports (docs/bulk.md "Imports") on the run's database: files written to disk and streamed to
 * the app over a real socket, then the operation followed until it ends.
 */
let test: TestApp;
let base: string;
let folder: string;
beforeAll(async () => {
  folder = tempFolder('imports');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool'), ROWI_IMPORT_MAX_BYTES: '200000' });
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => test.close());

let fileCount = 0;
function fileOf(text: string | Buffer): string {
  const path = join(folder, `file-${++fileCount}`);
  writeFileSync(path, text);
  return path;
}

async function toReply(response: Response): Promise<Reply> {
  const text = await response.text();
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: Object.fromEntries(response.headers), text, json, mediaType };
}

/** Streams a file from disk as the body of an import, over a real socket. */
async function upload(
  collection: string,
  text: string | Buffer,
  { type = 'text/csv', query = '', key = test.adminKey }: { type?: string; query?: string; key?: string } = {},
): Promise<Reply> {
  const response = await fetch(`${base}/v1/${collection}/import${query}`, {
    method: 'POST',
    headers: { 'content-type': type, 'x-api-key': key },
    body: createReadStream(fileOf(text)) as unknown as RequestInit['body'],
    duplex: 'half',
  } as RequestInit);
  return toReply(response);
}

async function finished(location: string, key = test.adminKey): Promise<Reply> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const reply = await test.call({ url: location, key });
    if (reply.status !== 200 || !['queued', 'running'].includes(reply.json.status)) return reply;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`operation ${location} did not end`);
}

const itemsBySku = async (prefix: string) =>
  test.storage.db
    .selectFrom('items')
    .innerJoin('stock', 'stock.item_id', 'items.id')
    .select(['items.sku', 'items.name', 'items.price', 'stock.quantity'])
    .where('items.sku', 'like', `${prefix}%`)
    .orderBy('items.sku')
    .execute();

describe('POST /v1/items/import', () => {
  it('POST /v1/items/import: 202 with Location, then the operation succeeds with every row stored, with its stock, events and audit, when a CSV file is good', async () => {
    const csv =
      '\uFEFFsku,name,price,quantity\r\nA-1,Anvil,12.50,3\nA-2,"Bolt, large",0.40,\r\nA-3,=cmd|\' /C calc\'!A0,1,0\n';
    const reply = await upload('items', csv);

    expect(reply.status).toBe(202);
    expect(reply.headers.location).toMatch(/^\/v1\/operations\/\d+$/);
    expect(reply.headers['retry-after']).toBe('1');
    expect(reply.json).toMatchObject({ kind: 'import', target: 'items', status: 'queued', media_type: 'text/csv' });
    expect(reply.json.options).toEqual({ mode: 'atomic', on_conflict: 'error', dry_run: false });
    const done = await finished(reply.headers.location as string);
    expect(done.json).toMatchObject({
      status: 'succeeded',
      progress: {
        rows_read: 3,
        rows_succeeded: 3,
        rows_failed: 0,
        committed_through: 4,
        bytes_total: Buffer.byteLength(csv),
      },
      summary: { rows_committed: 3 },
      errors: [],
    });
    expect(done.json.progress.bytes_read).toBe(Buffer.byteLength(csv));
    expect(await itemsBySku('A-')).toEqual([
      { sku: 'A-1', name: 'Anvil', price: 1250, quantity: 3 },
      { sku: 'A-2', name: 'Bolt, large', price: 40, quantity: 0 },
      // A formula-looking value is stored as the text it is.
      { sku: 'A-3', name: "=cmd|' /C calc'!A0", price: 100, quantity: 0 },
    ]);
    const events = await test.storage.db
      .selectFrom('events')
      .select(['type', 'path', 'data'])
      .where('path', 'like', '/v1/items/%')
      .execute();
    const created = events.filter((event) => event.type === 'item.created');
    expect(created).toHaveLength(3);
    // Each item.created carries the item as it was stored, as GET answers it (the insert returns only ids).
    for (const event of created) {
      const item = await test.call({ url: event.path, key: test.adminKey });
      expect(JSON.parse(event.data)).toEqual(item.json);
    }
    expect(events.filter((event) => event.type === 'stock.changed')).toHaveLength(1);
    const completed = await test.storage.db
      .selectFrom('events')
      .select(['type'])
      .where('path', '=', reply.headers.location as string)
      .execute();
    expect(completed.map((event) => event.type)).toContain('operation.completed');
    const audit = await test.storage.db
      .selectFrom('audit_events')
      .select(['method', 'action', 'status'])
      .where('request_id', '=', reply.headers['x-request-id'] as string)
      .where('duration_ms', '=', 0)
      .execute();
    expect(audit).toHaveLength(3);
  });

  it('POST /v1/items/import: the operation fails and nothing is stored, with every bad row listed, when one row of an atomic NDJSON import is bad', async () => {
    const lines = [
      '{"sku":"B-1","name":"Bell","price":"1.00"}',
      '[1,2]',
      'not json',
      '{"sku":"B-2","name":"Bell","price":"1.001"}',
      '{"sku":"B-1","name":"Bell again","price":"1.00"}',
    ];
    const reply = await upload('items', `${lines.join('\n')}\n`, { type: 'application/x-ndjson' });
    const done = await finished(reply.headers.location as string);

    expect(done.json.status).toBe('failed');
    expect(done.json.summary.rows_committed).toBe(0);
    expect(
      done.json.errors.map((error: { row: number; problem: string; field: string | null }) => [
        error.row,
        error.problem,
        error.field,
      ]),
    ).toEqual([
      [2, 'malformed-row', null],
      [3, 'malformed-row', null],
      [4, 'validation-failed', 'price'],
      [5, 'duplicate-in-file', 'sku'],
    ]);
    expect(await itemsBySku('B-')).toEqual([]);
    const download = await fetch(`${base}${reply.headers.location as string}/errors`, {
      headers: { 'x-api-key': test.adminKey },
    });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(
      (await download.text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).row),
    ).toEqual([2, 3, 4, 5]);
  });

  it('POST /v1/items/import: good rows are committed and bad ones reported, skipping and updating taken SKUs, in partial mode', async () => {
    const kept = await createItem(test, { sku: 'C-1', name: 'Kept', price: '5.00' });
    const first = await upload('items', 'sku,name,price,quantity\nC-1,Clamp,5.00,1\nC-2,Cog,x,1\nC-3,Cam,2.00,7\n', {
      query: '?mode=partial&on_conflict=skip',
    });
    const skipped = await finished(first.headers.location as string);
    expect(skipped.json).toMatchObject({
      status: 'succeeded',
      progress: { rows_read: 3, rows_succeeded: 1, rows_skipped: 1, rows_failed: 1, committed_through: 4 },
    });
    expect(skipped.json.errors).toEqual([
      expect.objectContaining({ row: 3, field: 'price', problem: 'validation-failed' }),
    ]);

    const second = await upload(
      'items',
      'sku,name,price,quantity\nC-1,Clamp,6.00,2\nC-3,Cam,2.00,9\nC-3,Cam,2.50,9\n',
      {
        query: '?mode=partial&on_conflict=update',
      },
    );
    expect((await finished(second.headers.location as string)).json.status).toBe('succeeded');
    expect(await itemsBySku('C-')).toEqual([
      { sku: 'C-1', name: 'Clamp', price: 600, quantity: 2 },
      { sku: 'C-3', name: 'Cam', price: 250, quantity: 9 },
    ]);
    expect(kept.item.id).toBeGreaterThan(0);
    // Each quantity the update changed has its set movement: the ledger adds up to the stock.
    const ledger = await test.storage.db
      .selectFrom('stock_movements')
      .select(['quantity_change', 'quantity_after'])
      .where('item_id', '=', kept.item.id)
      .orderBy('id')
      .execute();
    expect(ledger.map((move) => [Number(move.quantity_change), Number(move.quantity_after)])).toEqual([[2, 2]]);

    const refused = await upload('items', 'sku,name,price\nC-1,Clamp,6.00\nC-4,Cup,1.00\n', { query: '?mode=partial' });
    const conflict = await finished(refused.headers.location as string);
    expect(conflict.json.errors).toEqual([expect.objectContaining({ row: 2, field: 'sku', problem: 'sku-taken' })]);
    expect((await itemsBySku('C-4')).length).toBe(1);
  });

  it('POST /v1/items/import: a dry run checks every row and stores nothing', async () => {
    const reply = await upload('items', 'sku,name,price\nD-1,Drum,1.00\nD-2,Dial,2.00\n', { query: '?dry_run=true' });
    const done = await finished(reply.headers.location as string);
    expect(done.json).toMatchObject({
      status: 'succeeded',
      options: { dry_run: true },
      summary: { rows_committed: 0 },
    });
    expect(done.json.summary.detail).toMatch(/2 rows would be stored/);
    expect(await itemsBySku('D-')).toEqual([]);
  });

  it('POST /v1/items/import: 422 import-invalid and no operation when the file is empty, not UTF-8, holds NUL, or its header is wrong', async () => {
    const before = await test.storage.db.selectFrom('operations').select('id').execute();
    const cases: [string | Buffer, string][] = [
      ['', 'empty'],
      ['\uFEFF\n\n', 'empty'],
      [Buffer.from([0x73, 0x6b, 0x75, 0x0a, 0xc3, 0x28]), 'UTF-8'],
      ['sku,name,price\nE-1,E\u0000,1\n', 'NUL'],
      ['E-1,Eel,1.00\n', 'names none of the columns'],
      ['name,price\nEel,1.00\n', 'required column sku'],
      ['sku,name,price,colour\nE-1,Eel,1.00,red\n', 'unknown column'],
      ['sku,name,price,sku\n', 'second time'],
    ];
    for (const [text, says] of cases) {
      const reply = await upload('items', text);
      expectProblem(reply, 422, 'import-invalid');
      expect(reply.json.detail).toContain(says);
    }
    expect(await test.storage.db.selectFrom('operations').select('id').execute()).toEqual(before);
  });

  it('POST /v1/items/import: 413 import-too-large past ROWI_IMPORT_MAX_BYTES, and 415 for another media type', async () => {
    const big = `sku,name,price\n${'F-1,Fan,1.00\n'.repeat(20_000)}`;
    expectProblem(await upload('items', big), 413, 'import-too-large');
    const json = await upload('items', '{"sku":"F-2"}', { type: 'application/json' });
    expectProblem(json, 415, 'unsupported-media-type');
    expectProblem(await upload('items', 'sku\n', { type: 'text/csv; charset=latin1' }), 415, 'unsupported-media-type');
    expect(await itemsBySku('F-')).toEqual([]);
  });

  it('POST /v1/items/import: a file refused while it is still being sent (413 past the limit, 422 for a NUL) is answered on a connection that stays open: the client sends the rest, reads the answer, and its next request on that connection is answered', async () => {
    const port = Number(new URL(base).port);
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let ended = false;
    socket.on('data', (data) => (received += data.toString('latin1')));
    socket.on('close', () => (ended = true));
    socket.on('error', () => (ended = true));
    await new Promise((resolve) => socket.once('connect', resolve));
    const answers = async (count: number) => {
      for (let wait = 0; wait < 400 && !ended; wait++) {
        if ((received.match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= count && /\r\n\r\n[^]*\}$/.test(received)) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const rows = 'H-1,Hook,1.00\n'.repeat(10_000);
    const begin = `POST /v1/items/import HTTP/1.1\r\nHost: rowi\r\nX-API-Key: ${test.adminKey}\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n`;
    // Past ROWI_IMPORT_MAX_BYTES (200,000) in its second chunk: the answer comes before the end.
    socket.write(begin + chunk(`sku,name,price\n${rows}`) + chunk(rows));
    await answers(1);
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received).toContain('import-too-large');
    socket.write(chunk(rows) + chunk(rows) + '0\r\n\r\n');
    // A NUL byte in the middle of the file: 422 before its end.
    socket.write(begin + chunk(`sku,name,price\n${rows}\u0000`) + chunk(rows) + '0\r\n\r\n');
    await answers(2);
    expect(received.split(/(?=HTTP\/1\.1 \d{3} )/)[1]).toMatch(/^HTTP\/1\.1 422 [^]*import-invalid/);
    socket.write(`GET /v1/items?limit=1 HTTP/1.1\r\nHost: rowi\r\nX-API-Key: ${test.adminKey}\r\n\r\n`);
    await answers(3);
    expect(ended).toBe(false);
    expect(received.split(/(?=HTTP\/1\.1 \d{3} )/)[2]).toMatch(/^HTTP\/1\.1 200 /);
    socket.destroy();
    expect(await itemsBySku('H-')).toEqual([]);
  });

  it('POST /v1/items/import: a CSV row with too many fields is refused and a quote that never closes ends the file', async () => {
    const reply = await upload(
      'items',
      'sku,name,price\nG-1,Gear,1.00\nG-2,Gong,1.00,extra\nG-3,"Gate,1.00\nG-4,Glue,1.00\n',
      {
        query: '?mode=partial',
      },
    );
    const done = await finished(reply.headers.location as string);
    expect(done.json.status).toBe('failed');
    expect(done.json.errors.map((error: { row: number; problem: string }) => [error.row, error.problem])).toEqual([
      [3, 'malformed-row'],
      [4, 'malformed-file'],
    ]);
    expect(done.json.summary.committed).toMatch(/rows 2 to \d+ were committed/);
    expect((await itemsBySku('G-')).map((item) => item.sku)).toEqual(['G-1']);
  });

  it('POST /v1/items/import: a 10 MB field is refused without being held', async () => {
    const reply = await upload('items', `sku,name,price\nH-1,"${'x'.repeat(150_000)}",1.00\n`, {
      query: '?mode=partial',
    });
    const done = await finished(reply.headers.location as string);
    expect(done.json.status).toBe('succeeded');
    expect(done.json.errors[0]).toMatchObject({ row: 2, field: 'name', problem: 'validation-failed' });
  });
  it('POST /v1/items/import: 48 items whose names carry quotes, backslashes, braces, commas, the word NULL and characters beyond ASCII (one statement of many rows, an array a column on PostgreSQL): each stored as sent, its item.created the item as GET answers it', async () => {
    const names = Array.from({ length: 48 }, (_, index) =>
      index === 0
        ? 'NULL'
        : [
            `Quote "q" ${index}`,
            `Back\\slash\\ ${index}`,
            `{brace,comma} ${index}`,
            `Ünïcödé ✓ 😀 ${index}`,
            `'single' ${index}`,
            `"{}" ,\\" ${index}`,
          ][index % 6]!,
    );
    const cell = (text: string) => `"${text.replace(/"/g, '""')}"`;
    const csv = [
      'sku,name,price,quantity',
      ...names.map((name, index) => `ESC-${String(index).padStart(2, '0')},${cell(name)},1.${index % 10}0,${index}`),
    ].join('\n');
    const done = await finished((await upload('items', csv)).headers.location as string);
    expect(done.json).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 48, rows_failed: 0 } });
    expect(await itemsBySku('ESC-')).toEqual(
      names.map((name, index) => ({
        sku: `ESC-${String(index).padStart(2, '0')}`,
        name,
        price: 100 + (index % 10) * 10,
        quantity: index,
      })),
    );
    const created = await test.storage.db
      .selectFrom('events')
      .select(['path', 'data'])
      .where('type', '=', 'item.created')
      .where('data', 'like', '%"sku":"ESC-%')
      .execute();
    expect(created).toHaveLength(48);
    for (const event of created) {
      const item = await test.call({ url: event.path, key: test.adminKey });
      expect(JSON.parse(event.data)).toEqual(item.json);
    }
  });
});

describe('POST /v1/users/import and POST /v1/items/stock/import', () => {
  it('POST /v1/users/import: users are created, an email taken in another case is updated with on_conflict=update, and a duplicate in the file is refused', async () => {
    const first = await upload('users', 'name,email\nUna,una@example.com\nVic,vic@example.com\n');
    expect((await finished(first.headers.location as string)).json.status).toBe('succeeded');
    const second = await upload(
      'users',
      '{"name":"Una Two","email":"UNA@example.com"}\n{"name":"Wen","email":"wen@example.com"}\n{"name":"Wen again","email":"WEN@example.com"}\n',
      { type: 'application/x-ndjson', query: '?mode=partial' },
    );
    const done = await finished(second.headers.location as string);
    expect(done.json.errors.map((error: { row: number; problem: string }) => [error.row, error.problem])).toEqual([
      [1, 'email-taken'],
      [3, 'duplicate-in-file'],
    ]);
    const third = await upload('users', 'name,email\nUna Two,UNA@example.com\n', { query: '?on_conflict=update' });
    expect((await finished(third.headers.location as string)).json.progress.rows_succeeded).toBe(1);
    const users = await test.storage.db
      .selectFrom('users')
      .select(['name', 'email'])
      .where('email_key', 'in', ['una@example.com', 'vic@example.com', 'wen@example.com'])
      .orderBy('email_key')
      .execute();
    expect(users).toEqual([
      { name: 'Una Two', email: 'UNA@example.com' },
      { name: 'Vic', email: 'vic@example.com' },
      { name: 'Wen', email: 'wen@example.com' },
    ]);
  });

  it('POST /v1/users/import: 300 users (several statements and a short last one) are each created once with their event, with on_conflict=skip the same file again creates none, and with on_conflict=update each is renamed once', async () => {
    const rows = Array.from({ length: 300 }, (_, index) => `Bulk ${index},bulk.${index}@example.com`);
    const created = await finished(
      (await upload('users', `name,email\n${rows.join('\n')}\n`)).headers.location as string,
    );
    expect(created.json.progress).toMatchObject({ rows_succeeded: 300, rows_failed: 0, rows_skipped: 0 });
    const again = await upload('users', `name,email\n${rows.join('\n')}\n`, { query: '?on_conflict=skip' });
    const skipped = await finished(again.headers.location as string);
    expect(skipped.json.progress).toMatchObject({ rows_succeeded: 0, rows_failed: 0, rows_skipped: 300 });
    const stored = await test.storage.db
      .selectFrom('users')
      .select(['id', 'name', 'email'])
      .where('email', 'like', 'bulk.%@example.com')
      .orderBy('id')
      .execute();
    expect(stored.map((user) => user.email)).toEqual(rows.map((row) => row.split(',')[1]));
    const events = await test.storage.db
      .selectFrom('events')
      .select('path')
      .where('type', '=', 'user.created')
      .where(
        'path',
        'in',
        stored.map((user) => `/v1/users/${user.id}`),
      )
      .execute();
    expect(events).toHaveLength(300);
    const renamed = rows.map((row) => row.replace('Bulk', 'Renamed').replace('bulk.', 'BULK.'));
    const update = await upload('users', `name,email\n${renamed.join('\n')}\n`, { query: '?on_conflict=update' });
    const updated = await finished(update.headers.location as string);
    expect(updated.json.progress).toMatchObject({ rows_succeeded: 300, rows_failed: 0, rows_skipped: 0 });
    const after = await test.storage.db
      .selectFrom('users')
      .select(['id', 'name', 'email', 'version'])
      .where('email_key', 'like', 'bulk.%@example.com')
      .orderBy('id')
      .execute();
    expect(after).toEqual(
      stored.map((user, index) => ({
        id: user.id,
        name: `Renamed ${index}`,
        email: `BULK.${index}@example.com`,
        version: 2,
      })),
    );
  });

  it('POST /v1/items/stock/import: levels are set by sku or item_id, each with its set movement, and an unknown item is refused', async () => {
    const { item } = await createItem(test, { sku: 'L-1' });
    const other = await createItem(test, { sku: 'L-2' });
    const reply = await upload('items/stock', `sku,item_id,quantity\nL-1,,40\n,${other.item.id},7\nL-404,,1\n`, {
      query: '?mode=partial',
    });
    const done = await finished(reply.headers.location as string);
    expect(done.json.progress).toMatchObject({ rows_succeeded: 2, rows_failed: 1 });
    expect(done.json.errors).toEqual([expect.objectContaining({ row: 4, problem: 'unknown-reference' })]);
    const levels = await test.storage.db
      .selectFrom('stock')
      .select(['item_id', 'quantity'])
      .where('item_id', 'in', [item.id, other.item.id])
      .orderBy('item_id')
      .execute();
    expect(levels).toEqual([
      { item_id: item.id, quantity: 40 },
      { item_id: other.item.id, quantity: 7 },
    ]);
    const moves = await test.storage.db
      .selectFrom('stock_movements')
      .select(['item_id', 'kind', 'quantity_change'])
      .where('item_id', 'in', [item.id, other.item.id])
      .orderBy('item_id')
      .execute();
    expect(moves).toEqual([
      { item_id: item.id, kind: 'set', quantity_change: 40 },
      { item_id: other.item.id, kind: 'set', quantity_change: 7 },
    ]);
  });
});

describe('/v1/operations', () => {
  it('POST /v1/operations/{id}/cancel: a running partial import stops at its next commit, keeping exactly the rows it committed', async () => {
    const rows = Array.from({ length: 6000 }, (_, index) => `M-${index},Mallet ${index},1.00,1`).join('\n');
    const reply = await upload('items', `sku,name,price,quantity\n${rows}\n`, { query: '?mode=partial' });
    const cancelled = await test.call({ method: 'POST', url: `${reply.headers.location as string}/cancel` });
    expect(cancelled.status).toBe(202);
    const done = await finished(reply.headers.location as string);
    expect(done.json.status).toBe('cancelled');
    const stored = await itemsBySku('M-');
    expect(stored.length).toBe(done.json.summary.rows_committed);
    expect(stored.length).toBeLessThan(6000);
    expect(done.json.progress.committed_through).toBe(stored.length === 0 ? 0 : stored.length + 1);
  });

  it('GET /v1/operations: a caller sees only the operations it started, an admin sees all, paged by cursor', async () => {
    const editor = await createCallerWithKey(test, { role: 'editor', extra_scopes: ['stock:update'] });
    const own = await upload('items', 'sku,name,price\nJ-1,Jar,1.00\n', { key: editor.key });
    expect(own.status).toBe(202);
    await finished(own.headers.location as string, editor.key);

    const mine = await test.call({ url: '/v1/operations', key: editor.key });
    expect(mine.status).toBe(200);
    expect(mine.json.data.map((operation: { id: number }) => `/v1/operations/${operation.id}`)).toEqual([
      own.headers.location,
    ]);
    const others = (await test.call({ url: '/v1/operations?limit=1' })).json;
    expect(others.next_cursor).toEqual(expect.any(String));
    const notMine = await test.call({ url: `/v1/operations/${others.data[0].id}`, key: editor.key });
    expectProblem(notMine, 404, 'not-found');
    expectProblem(
      await test.call({ url: `/v1/operations/${others.data[0].id}/errors`, key: editor.key }),
      404,
      'not-found',
    );
  });

  it('POST /v1/operations/{id}/cancel: 409 operation-finished once it has ended', async () => {
    const reply = await upload('items', 'sku,name,price\nK-1,Key,1.00\n');
    await finished(reply.headers.location as string);
    expectProblem(
      await test.call({ method: 'POST', url: `${reply.headers.location as string}/cancel` }),
      409,
      'operation-finished',
    );
  });
});
