import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { createItem } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The items import with on_conflict=update, row by row: what each row counts as, the item and stock
 * events of one chunk in the order they are recorded, and the stock ledger.
 */
let test: TestApp;
let importer: Importer;
beforeAll(async () => {
  const folder = tempFolder('items-import');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool') });
  importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
});
afterAll(() => test.close());

describe('POST /v1/items/import', () => {
  it('POST /v1/items/import: with on_conflict=update, a new SKU is created with its stock, a changed item is updated, an unchanged item whose quantity differs counts as updated, and one that changes nothing is skipped; the events are the items’ (created, then updated), then their stock’s', async () => {
    const renamed = (await createItem(test, { sku: 'U-1', name: 'Urn', price: '1.00' })).item;
    const restocked = (await createItem(test, { sku: 'U-2', name: 'Ute', price: '2.00' })).item;
    const kept = (await createItem(test, { sku: 'U-3', name: 'Uke', price: '3.00' })).item;
    const [{ last } = { last: 0 }] = await test.storage.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('last'))
      .execute();

    const reply = await importer.upload(
      'items',
      'sku,name,price,quantity\nU-1,Urn (large),1.00,\nU-2,Ute,2.00,5\nU-3,Uke,3.00,\nU-4,Urchin,4.00,6\n',
      { query: '?on_conflict=update' },
    );
    const done = await importer.finished(reply.headers.location as string);

    expect(done.json).toMatchObject({
      status: 'succeeded',
      progress: { rows_read: 4, rows_succeeded: 3, rows_skipped: 1, rows_failed: 0 },
      errors: [],
    });
    const created = await test.storage.db
      .selectFrom('items')
      .select('id')
      .where('sku', '=', 'U-4')
      .executeTakeFirstOrThrow();
    const events = await test.storage.db
      .selectFrom('events')
      .select(['type', 'path'])
      .where('seq', '>', Number(last))
      .where('path', 'like', '/v1/items/%')
      .orderBy('seq')
      .execute();
    expect(events).toEqual([
      { type: 'item.created', path: `/v1/items/${created.id}` },
      { type: 'item.updated', path: `/v1/items/${renamed.id}` },
      { type: 'stock.changed', path: `/v1/items/${created.id}/stock` },
      { type: 'stock.changed', path: `/v1/items/${restocked.id}/stock` },
    ]);
    const ledger = await test.storage.db
      .selectFrom('stock_movements')
      .select(['item_id', 'kind', 'quantity_change', 'quantity_after'])
      .where('item_id', 'in', [renamed.id, restocked.id, kept.id, created.id])
      .orderBy('id')
      .execute();
    expect(
      ledger.map((move) => [
        Number(move.item_id),
        move.kind,
        Number(move.quantity_change),
        Number(move.quantity_after),
      ]),
    ).toEqual([
      [Number(created.id), 'set', 6, 6],
      [restocked.id, 'set', 5, 5],
    ]);
    // Each row that wrote something is audited as its single request: POST for the new item, PUT for the others.
    const audited = await test.storage.db
      .selectFrom('audit_events')
      .select(['method', 'path'])
      .where('request_id', '=', reply.headers['x-request-id'] as string)
      .where('resource', '=', 'items')
      .where('duration_ms', '=', 0)
      .orderBy('id')
      .execute();
    expect(audited).toEqual([
      { method: 'POST', path: `/v1/items/${created.id}` },
      { method: 'PUT', path: `/v1/items/${renamed.id}` },
      { method: 'PUT', path: `/v1/items/${restocked.id}` },
    ]);
  });
});
