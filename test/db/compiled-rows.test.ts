import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RowsInto } from '../../src/db/compiled.js';
import { isSqlite } from '../../src/db/dialect.js';
import { startApp, type TestApp } from '../helpers/app.js';

/**
 * compiledRowInserts and compiledRowWrites (db/compiled.ts), on SQLite and on PostgreSQL: rows
 * whose statement shares a column's value bind it once (`insert … select … from (values …)`), and
 * what is stored is exactly what was given, whatever the rows share.
 */
let test: TestApp;
// A module of its own: the statements that bind shared values are bounded in the process, and
// other test files of this process may have compiled some.
vi.resetModules();
const { compiledRowInserts, compiledRowWrites, sharedStatementCount } = await import('../../src/db/compiled.js');
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const ATTEMPTS: RowsInto<'webhook_attempts'> = {
  table: 'webhook_attempts',
  columns: ['delivery_id', 'attempted_at', 'status_code', 'duration_ms', 'error'],
  types: ['bigint', 'text', 'integer', 'integer', 'text'],
};
const insertAttempts = compiledRowInserts(128, ATTEMPTS);
type Attempt = [number, string, number | null, number, string | null];

let deliveryId: number;
beforeAll(async () => {
  const { db } = test.storage;
  const now = '2026-11-27T00:00:00.000Z';
  const endpoint = await db
    .insertInto('webhook_endpoints')
    .values({
      url: 'http://127.0.0.1:9/hook',
      description: 'rows',
      events: '*',
      resources: '*',
      enabled: 1,
      secret: 'whsec_rows',
      created_at: now,
      updated_at: now,
    } as never)
    .returning('id')
    .executeTakeFirstOrThrow();
  const delivery = await db
    .insertInto('webhook_deliveries')
    .values({
      endpoint_id: endpoint.id,
      event_id: 'evt_rows',
      event_type: 'item.created',
      status: 'pending',
      attempts: 0,
      created_at: now,
      updated_at: now,
    } as never)
    .returning('id')
    .executeTakeFirstOrThrow();
  deliveryId = delivery.id;
});

async function storedAttempts(from: string): Promise<Attempt[]> {
  const rows = await test.storage.db
    .selectFrom('webhook_attempts')
    .select(['delivery_id', 'attempted_at', 'status_code', 'duration_ms', 'error'])
    .where('attempted_at', '>=', from)
    .orderBy('id')
    .execute();
  return rows.map((row) => [Number(row.delivery_id), row.attempted_at, row.status_code, row.duration_ms, row.error]);
}

async function roundTrip(rows: Attempt[]): Promise<void> {
  const from = rows[0]![1];
  await insertAttempts(test.storage.db, rows.flat());
  expect(await storedAttempts(from)).toEqual(rows);
}

describe('multi-row inserts that share values', () => {
  it('rows sharing some columns (a null, a number, a text) are stored each with its own values, in order', async () => {
    const rows: Attempt[] = Array.from({ length: 300 }, (_, index) => [
      deliveryId,
      `2026-11-27T01:00:00.${String(index).padStart(3, '0')}Z`,
      null,
      index % 7,
      'connection refused',
    ]);
    const before = sharedStatementCount();
    await roundTrip(rows);
    // 128 + 128 + 32 rows bound their shared values once (the last 12 went as plain rows).
    expect(sharedStatementCount() - before).toBe(2);
  });

  it('rows alike in every column are all stored (one column stays in the VALUES list)', async () => {
    const rows: Attempt[] = Array.from({ length: 40 }, () => [deliveryId, '2026-11-27T02:00:00.000Z', 500, 12, null]);
    await roundTrip(rows);
  });

  it('a value shared in one statement and not in the next (statements of 128, 64, 32 …) is stored right in both', async () => {
    const rows: Attempt[] = Array.from({ length: 128 + 64 + 20 }, (_, index) => [
      deliveryId,
      `2026-11-27T03:00:00.${String(index).padStart(3, '0')}Z`,
      index < 128 ? 204 : 200 + (index % 3),
      index < 150 ? 5 : index,
      index >= 128 ? 'late' : null,
    ]);
    await roundTrip(rows);
  });

  it('more sets of shared columns than are compiled for one size go as plain rows, still stored right', async () => {
    const before = sharedStatementCount();
    for (let shape = 0; shape < 8; shape++) {
      // Each pass shares a different set of columns among its 32 rows.
      const rows: Attempt[] = Array.from({ length: 32 }, (_, index) => [
        deliveryId,
        `2026-11-27T04:0${shape}:00.${String(index).padStart(3, '0')}Z`,
        shape & 1 ? 201 : index,
        shape & 2 ? 3 : index,
        shape & 4 ? 'shared' : `own ${index}`,
      ]);
      await roundTrip(rows);
    }
    // Eight sets of 32-row statements; at most four sets of one size are compiled (some may be already).
    expect(sharedStatementCount() - before).toBeGreaterThan(0);
    expect(sharedStatementCount() - before).toBeLessThanOrEqual(4);
  });

  it('a statement with a conflict rule and RETURNING answers the rows it inserted, the conflicting ones left out', async () => {
    const insertItems = compiledRowInserts(
      128,
      {
        table: 'items',
        columns: ['name', 'sku', 'price', 'created_by', 'version', 'created_at', 'updated_at'],
        types: ['text', 'text', 'bigint', 'bigint', 'integer', 'text', 'text'],
      },
      (insert) => insert.onConflict((conflict) => conflict.column('sku').doNothing()).returning(['id', 'sku', 'price']),
    );
    const now = '2026-11-27T05:00:00.000Z';
    const { db } = test.storage;
    await db
      .insertInto('items')
      .values({ name: 'taken', sku: 'ROWS-7', price: 1, version: 1, created_at: now, updated_at: now })
      .execute();
    const values = Array.from({ length: 40 }, (_, index) => [`Row ${index}`, `ROWS-${index}`, 250, null, 1, now, now]);
    const returned = await insertItems(db, values.flat());
    expect(returned.map((row) => row.sku)).toEqual(values.map((row) => row[1]).filter((sku) => sku !== 'ROWS-7'));
    expect(returned.every((row) => Number(row.price) === 250)).toBe(true);
    const stored = await db
      .selectFrom('items')
      .select(['name', 'sku', 'price', 'created_at'])
      .where('sku', 'like', 'ROWS-%')
      .orderBy('id')
      .execute();
    expect(stored).toHaveLength(40);
    expect(stored.find((row) => row.sku === 'ROWS-7')!.name).toBe('taken');
    expect(stored.filter((row) => row.sku !== 'ROWS-7').map((row) => row.name)).toEqual(
      values.filter((row) => row[1] !== 'ROWS-7').map((row) => row[0]),
    );
  });

  it('compiledRowWrites counts each statement’s rows and (SQLite) its last id: the new rows’ ids, consecutive', async () => {
    const writeItems = compiledRowWrites(16, {
      table: 'items',
      columns: ['name', 'sku', 'price', 'created_by', 'version', 'created_at', 'updated_at'],
      types: ['text', 'text', 'bigint', 'bigint', 'integer', 'text', 'text'],
    });
    const now = '2026-11-27T06:00:00.000Z';
    const values = Array.from({ length: 40 }, (_, index) => [
      `Counted ${index}`,
      `CNT-${index}`,
      99,
      null,
      1,
      now,
      now,
    ]);
    const { db } = test.storage;
    const written = await writeItems(db, values.flat());
    // Blocks of 16 on SQLite; on PostgreSQL statements of up to 1,024 rows, so 32 and 8.
    expect(written.map((statement) => [statement.rows, statement.changes])).toEqual(
      isSqlite(db)
        ? [
            [16, 16],
            [16, 16],
            [8, 8],
          ]
        : [
            [32, 32],
            [8, 8],
          ],
    );
    const stored = await db
      .selectFrom('items')
      .select(['id', 'sku'])
      .where('sku', 'like', 'CNT-%')
      .orderBy('id')
      .execute();
    expect(stored.map((row) => row.sku)).toEqual(values.map((row) => row[1]));
    if (isSqlite(db)) {
      const ids = written.flatMap((statement) =>
        Array.from({ length: statement.rows }, (_, index) => statement.lastId - statement.rows + 1 + index),
      );
      expect(ids).toEqual(stored.map((row) => Number(row.id)));
    }
  });
});
