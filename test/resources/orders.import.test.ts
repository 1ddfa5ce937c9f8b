import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * POST /v1/orders/import (docs/bulk.md "Imports"): orders placed as POST /v1/orders places them,
 * each reserving its stock with its ledger entries, events and audit record; files streamed over a
 * real socket, the operation followed until it ends, and the stock and its ledger read back.
 */
let test: TestApp;
let importer: Importer;
beforeAll(async () => {
  const folder = tempFolder('orders-import');
  test = await startApp({ ROWI_IMPORT_DIRECTORY: join(folder, 'spool'), ROWI_IMPORT_MAX_BYTES: '400000' });
  importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
});
afterAll(() => test.close());

async function stockedItem(quantity: number): Promise<number> {
  const { item } = await createItem(test);
  if (quantity > 0) await setStock(test, item.id, quantity);
  return item.id;
}

/** The stock of the items, and whether each one's ledger adds up to it (the ledger balances). */
async function stockOf(itemIds: number[]) {
  const stock = await test.storage.db
    .selectFrom('stock')
    .select(['item_id', 'quantity', 'reserved'])
    .where('item_id', 'in', itemIds)
    .orderBy('item_id')
    .execute();
  const moves = await test.storage.db
    .selectFrom('stock_movements')
    .select(['item_id', 'quantity_change', 'reserved_change'])
    .where('item_id', 'in', itemIds)
    .execute();
  return stock.map((level) => {
    const own = moves.filter((move) => Number(move.item_id) === Number(level.item_id));
    const sum = (pick: (move: (typeof own)[number]) => unknown) =>
      own.reduce((total, move) => total + Number(pick(move)), 0);
    return {
      quantity: Number(level.quantity),
      reserved: Number(level.reserved),
      balanced:
        sum((move) => move.quantity_change) === Number(level.quantity) &&
        sum((move) => move.reserved_change) === Number(level.reserved),
    };
  });
}

const ordersNamed = (prefix: string) =>
  test.storage.db
    .selectFrom('orders')
    .select(['id', 'name', 'user_id', 'status', 'total'])
    .where('name', 'like', `${prefix}%`)
    .orderBy('id')
    .execute();

type RowErrors = { row: number; field: string | null; problem: string }[];
const rowsOf = (errors: RowErrors) => errors.map((error) => [error.row, error.field, error.problem]);

describe('POST /v1/orders/import', () => {
  it('POST /v1/orders/import: in partial mode each good order reserves its stock with events, ledger and audit, and an order that would oversell or names nothing is a row error, when the file is CSV', async () => {
    const { user } = await createUser(test);
    const [bolt, nut] = [await stockedItem(10), await stockedItem(5)];
    const csv = [
      'order,name,user_id,item_id,quantity',
      `P-1,,${user.id},${bolt},2`,
      `P-1,,,${nut},1`,
      `P-2,Second,${user.id},${bolt},100`,
      `P-3,,${user.id},999999,1`,
      `P-4,,${user.id},${nut},1`,
      `P-4,,${user.id},${bolt},3`,
      `P-5,,${user.id},${nut},0`,
    ].join('\r\n');
    const reply = await importer.upload('orders', `${csv}\n`, { query: '?mode=partial' });

    expect(reply.status).toBe(202);
    expect(reply.json).toMatchObject({ target: 'orders', status: 'queued', options: { mode: 'partial' } });
    const done = await importer.finished(reply.headers.location as string);
    expect(done.json).toMatchObject({
      status: 'succeeded',
      progress: { rows_read: 5, rows_succeeded: 2, rows_failed: 3, committed_through: 8 },
      summary: { rows_committed: 2 },
    });
    expect(rowsOf(done.json.errors)).toEqual([
      [4, 'lines', 'insufficient-stock'],
      [5, 'lines', 'unknown-reference'],
      [8, 'quantity', 'validation-failed'],
    ]);
    const orders = await ordersNamed('P-');
    expect(orders.map((order) => [order.name, order.status, Number(order.total)])).toEqual([
      ['P-1', 'placed', 750],
      ['P-4', 'placed', 1000],
    ]);
    expect(await stockOf([bolt, nut])).toEqual([
      { quantity: 5, reserved: 5, balanced: true },
      { quantity: 3, reserved: 2, balanced: true },
    ]);
    const events = await test.storage.db
      .selectFrom('events')
      .select(['type', 'path'])
      .where(
        'path',
        'in',
        orders.map((order) => `/v1/orders/${order.id}`),
      )
      .execute();
    expect(events.map((event) => event.type)).toEqual(['order.created', 'order.created']);
    const audit = await test.storage.db
      .selectFrom('audit_events')
      .select(['method', 'path', 'status'])
      .where('request_id', '=', reply.headers['x-request-id'] as string)
      .where('duration_ms', '=', 0)
      .orderBy('path')
      .execute();
    expect(audit).toEqual(orders.map((order) => ({ method: 'POST', path: `/v1/orders/${order.id}`, status: 201 })));
  });

  it('POST /v1/orders/import: an atomic NDJSON import fails with nothing reserved when its last order would oversell, also across chunks; a dry run stores nothing', async () => {
    const { user } = await createUser(test);
    const gear = await stockedItem(120);
    const line = (name: string, quantity: number) =>
      JSON.stringify({ name, user_id: user.id, lines: [{ item_id: gear, quantity }] });
    // 150 orders of one unit each (two chunks of 100): the 121st would oversell.
    const many = Array.from({ length: 150 }, (_, index) => line(`Q-${index}`, 1)).join('\n');
    const failed = await importer.finished(
      (await importer.upload('orders', many, { type: 'application/x-ndjson' })).headers.location as string,
    );
    expect(failed.json).toMatchObject({ status: 'failed', summary: { rows_committed: 0 } });
    expect(rowsOf(failed.json.errors).slice(0, 1)).toEqual([[121, 'lines', 'insufficient-stock']]);
    expect(failed.json.progress.rows_failed).toBe(30);

    const bad = ['[1,2]', 'not json', line('Q-last', 121)].join('\n');
    const refused = await importer.finished(
      (await importer.upload('orders', `${line('Q-first', 1)}\n${bad}\n`, { type: 'application/x-ndjson' })).headers
        .location as string,
    );
    expect(refused.json.status).toBe('failed');
    expect(rowsOf(refused.json.errors)).toEqual([
      [2, null, 'malformed-row'],
      [3, null, 'malformed-row'],
      [4, 'lines', 'insufficient-stock'],
    ]);

    const dry = await importer.finished(
      (
        await importer.upload('orders', `${line('Q-dry', 120)}\n`, {
          type: 'application/x-ndjson',
          query: '?dry_run=true',
        })
      ).headers.location as string,
    );
    expect(dry.json).toMatchObject({ status: 'succeeded', options: { dry_run: true }, summary: { rows_committed: 0 } });
    expect(await ordersNamed('Q-')).toEqual([]);
    expect(await stockOf([gear])).toEqual([{ quantity: 120, reserved: 0, balanced: true }]);

    const good = await importer.finished(
      (
        await importer.upload('orders', Array.from({ length: 120 }, (_, index) => line(`Q-${index}`, 1)).join('\n'), {
          type: 'application/x-ndjson',
        })
      ).headers.location as string,
    );
    expect(good.json).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 120 } });
    expect(await stockOf([gear])).toEqual([{ quantity: 0, reserved: 120, balanced: true }]);
  });

  it('POST /v1/orders/import: a cancelled partial import keeps exactly the orders it committed, and the ledger balances', async () => {
    const { user } = await createUser(test);
    const item = await stockedItem(100_000);
    const rows = Array.from({ length: 3000 }, (_, index) => `R-${index},,${user.id},${item},1`).join('\n');
    const reply = await importer.upload('orders', `order,name,user_id,item_id,quantity\n${rows}\n`, {
      query: '?mode=partial',
    });
    expect((await test.call({ method: 'POST', url: `${reply.headers.location as string}/cancel` })).status).toBe(202);
    const done = await importer.finished(reply.headers.location as string);
    expect(done.json.status).toBe('cancelled');
    const stored = await ordersNamed('R-');
    expect(stored.length).toBe(done.json.summary.rows_committed);
    expect(stored.length).toBeLessThan(3000);
    expect(done.json.progress.committed_through).toBe(stored.length === 0 ? 0 : stored.length + 1);
    expect(await stockOf([item])).toEqual([
      { quantity: 100_000 - stored.length, reserved: stored.length, balanced: true },
    ]);
  });

  it('POST /v1/orders/import: bad files are refused at once (422, 413, 415, 400) and bad rows reported, with nothing stored', async () => {
    const before = await test.storage.db.selectFrom('operations').select('id').execute();
    const header = 'order,user_id,item_id,quantity';
    const cases: [string | Buffer, string][] = [
      ['', 'empty'],
      ['S-1,1,1,1\n', 'names none of the columns'],
      ['order,user_id,item_id,quantity,colour\nS-1,1,1,1,red\n', 'unknown column'],
      ['order,user_id,quantity\nS-1,1,1\n', 'required column item_id'],
      [`${header}\nS-1,1,1,1\u0000\n`, 'NUL'],
      [Buffer.concat([Buffer.from(`${header}\nS-1,`), Buffer.from([0xc3, 0x28]), Buffer.from(',1,1\n')]), 'UTF-8'],
    ];
    for (const [text, says] of cases) {
      const reply = await importer.upload('orders', text);
      expectProblem(reply, 422, 'import-invalid');
      expect(reply.json.detail).toContain(says);
    }
    expectProblem(
      await importer.upload('orders', '{"name":"S"}', { type: 'application/json' }),
      415,
      'unsupported-media-type',
    );
    expectProblem(await importer.upload('orders', `${header}\n`, { query: '?on_conflict=skip' }), 400, 'invalid-query');
    expectProblem(
      await importer.upload('orders', `${header}\n${'S-1,1,1,1\n'.repeat(50_000)}`),
      413,
      'import-too-large',
    );
    const blind = await createCallerWithKey(test, { role: 'editor', removed_scopes: ['users:read'] });
    expectProblem(
      await importer.upload('orders', `${header}\nS-1,1,1,1\n`, { key: blind.key }),
      403,
      'insufficient-scope',
    );
    expect(await test.storage.db.selectFrom('operations').select('id').execute()).toEqual(before);

    const { user } = await createUser(test);
    const item = await stockedItem(10);
    const rows = [
      header,
      `S-1,${user.id},${item},1,extra`,
      `S-1,${user.id},${item},1`,
      `S-2,${user.id},${item},1`,
      `S-3,${user.id + 1000},${item},1`,
      `S-4,${user.id},${item},1`,
      `S-4,${user.id + 1},${item},1`,
      `S-5,${user.id},${item},1`,
      `S-6,${user.id},"${item},1`,
    ];
    const done = await importer.finished(
      (await importer.upload('orders', `${rows.join('\n')}\n`, { query: '?mode=partial' })).headers.location as string,
    );
    expect(done.json.status).toBe('failed');
    expect(rowsOf(done.json.errors)).toEqual([
      [2, null, 'malformed-row'],
      [5, 'user_id', 'unknown-reference'],
      [6, 'user_id', 'validation-failed'],
      [9, null, 'malformed-file'],
    ]);
    expect((await ordersNamed('S-')).map((order) => order.name)).toEqual(['S-2', 'S-5']);
    expect(await stockOf([item])).toEqual([{ quantity: 8, reserved: 2, balanced: true }]);
  });
});
