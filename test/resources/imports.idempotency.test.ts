import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { storedOperationCount } from '../helpers/stored.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * Idempotency-Key on imports (docs/bulk.md "Imports"): a retried upload with the same key, file and
 * options answers the operation the first one queued and runs nothing again; the same key with
 * another file or other options is refused. Files streamed over a real socket, on the run's database.
 */
let test: TestApp;
let importer: Importer;
beforeAll(async () => {
  const folder = tempFolder('imports-idempotency');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool') });
  importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
});
afterAll(() => test.close());

const NDJSON = 'application/x-ndjson';

/** An item with `quantity` in stock, a user, and an NDJSON file of `count` orders of one unit each, named `prefix-n`. */
async function ordersFile(prefix: string, count: number) {
  const { user } = await createUser(test);
  const { item } = await createItem(test);
  await setStock(test, item.id, 100);
  const lines = Array.from({ length: count }, (_, index) =>
    JSON.stringify({ name: `${prefix}-${index}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] }),
  );
  return { itemId: item.id, text: `${lines.join('\n')}\n` };
}

const ordersNamed = async (prefix: string) =>
  (await test.storage.db.selectFrom('orders').select('id').where('name', 'like', `${prefix}-%`).execute()).length;

const reservedOf = async (itemId: number) =>
  Number(
    (await test.storage.db.selectFrom('stock').select('reserved').where('item_id', '=', itemId).executeTakeFirst())
      ?.reserved,
  );

describe('POST /v1/<collection>/import with Idempotency-Key', () => {
  it('POST /v1/orders/import: the retry answers the first operation again (202, Idempotent-Replayed, the same Location) and every order is placed once, when the same key comes with the same file', async () => {
    const { itemId, text } = await ordersFile('IDEM-A', 4);
    const headers = { 'idempotency-key': 'orders-upload-a' };
    const first = await importer.upload('orders', text, { type: NDJSON, query: '?mode=partial', headers });
    expect(first.status).toBe(202);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect((await importer.finished(String(first.headers.location))).json.status).toBe('succeeded');

    const retried = await importer.upload('orders', text, { type: NDJSON, query: '?mode=partial', headers });
    expect(retried.status).toBe(202);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.headers.location).toBe(first.headers.location);
    expect(retried.headers['retry-after']).toBe('1');
    expect(retried.json).toEqual(first.json);
    expect(await ordersNamed('IDEM-A')).toBe(4);
    expect(await reservedOf(itemId)).toBe(4);
  });

  it('POST /v1/orders/import: two uploads at once with one key queue one operation, and both answer its Location, when the key and file are the same', async () => {
    const { itemId, text } = await ordersFile('IDEM-B', 3);
    const before = await storedOperationCount(test);
    const headers = { 'idempotency-key': 'orders-upload-b' };
    const answers = await Promise.all([
      importer.upload('orders', text, { type: NDJSON, headers }),
      importer.upload('orders', text, { type: NDJSON, headers }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
    expect(answers[0]!.headers.location).toBe(answers[1]!.headers.location);
    expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
    expect((await importer.finished(String(answers[0]!.headers.location))).json.status).toBe('succeeded');
    expect(await storedOperationCount(test)).toBe(before + 1);
    expect(await ordersNamed('IDEM-B')).toBe(3);
    expect(await reservedOf(itemId)).toBe(3);
  });

  it('POST /v1/orders/import: 422 idempotency-key-reused and nothing queued, when the same key comes with another file or other options', async () => {
    const { text } = await ordersFile('IDEM-C', 2);
    const headers = { 'idempotency-key': 'orders-upload-c' };
    const first = await importer.upload('orders', text, { type: NDJSON, headers });
    expect(first.status).toBe(202);
    await importer.finished(String(first.headers.location));
    const before = await storedOperationCount(test);

    const otherFile = await importer.upload('orders', `${text}${text.split('\n')[0]}\n`, { type: NDJSON, headers });
    expect(expectProblem(otherFile, 422, 'idempotency-key-reused').errors).toEqual([
      expect.objectContaining({ in: 'header', pointer: '#/idempotency-key' }),
    ]);
    const otherOptions = await importer.upload('orders', text, { type: NDJSON, query: '?dry_run=true', headers });
    expectProblem(otherOptions, 422, 'idempotency-key-reused');
    expect(await storedOperationCount(test)).toBe(before);
    expect(await ordersNamed('IDEM-C')).toBe(2);

    // An option given as its default is the same request.
    const sameOptions = await importer.upload('orders', text, { type: NDJSON, query: '?mode=atomic', headers });
    expect(sameOptions.status).toBe(202);
    expect(sameOptions.headers['idempotent-replayed']).toBe('true');
  });

  it("POST /v1/items/import: the same key and file from another caller queues that caller's own operation, when keys are per caller", async () => {
    const other = await createCallerWithKey(test, { role: 'editor' });
    const text = 'sku,name,price\nIDEM-D-1,Widget,1.00\n';
    const headers = { 'idempotency-key': 'items-upload-d' };
    const mine = await importer.upload('items', text, { query: '?on_conflict=skip', headers });
    const theirs = await importer.upload('items', text, { query: '?on_conflict=skip', headers, key: other.key });
    expect([mine.status, theirs.status]).toEqual([202, 202]);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(theirs.headers.location).not.toBe(mine.headers.location);
  });

  it('GET /v1/openapi.json: every import operation declares the Idempotency-Key header and Idempotent-Replayed on its 202', async () => {
    const document = (await test.call({ url: '/v1/openapi.json', key: null })).json as {
      paths: Record<
        string,
        {
          post?: {
            parameters?: { name: string; in: string }[];
            responses: Record<string, { headers?: Record<string, unknown> }>;
          };
        }
      >;
    };
    const imports = Object.entries(document.paths).filter(([path]) => path.endsWith('/import'));
    expect(imports.map(([path]) => path).sort()).toEqual([
      '/v1/items/import',
      '/v1/items/stock/import',
      '/v1/orders/import',
      '/v1/users/import',
    ]);
    for (const [, item] of imports) {
      expect(item.post!.parameters).toContainEqual(expect.objectContaining({ name: 'idempotency-key', in: 'header' }));
      expect(Object.keys(item.post!.responses['202']!.headers ?? {})).toContain('Idempotent-Replayed');
    }
  });
});
