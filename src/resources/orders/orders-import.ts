import { setImmediate as turn } from 'node:timers/promises';
import type { Trx } from '../../db/database.js';
import { withSavepoint } from '../../db/savepoint.js';
import { AppError } from '../../errors.js';
import { ChunkReport, integerCell } from '../../engine/imports/target.js';
import type { ImportContext, ImportRow, ImportTarget } from '../../engine/imports/target.js';
import { MAX_LINES, OrderCreateSchema, type OrderCreate } from './orders.schema.js';
import { placeOrder } from './orders.service.js';
import { holdStockOfCheckedOrders } from './placement.repository.js';

/**
 * The orders import (docs/bulk.md "Imports"): each record is placed exactly as POST /v1/orders
 * places it (placeOrder: the same checks, the same reservations through placement.repository.ts,
 * its order.created and stock.changed events and ledger entries), in the chunk's unit of work
 * with its audit record. Each order is placed in a savepoint of its own: an order refused (a user
 * or item that does not exist, stock that cannot cover it) leaves nothing behind, and in partial
 * mode the chunk's other orders commit.
 *
 * Orders have no natural key (`name` is the caller's reference, not unique), so there is no
 * on_conflict: two records alike are two orders, as two POSTs are.
 *
 * CSV: a row per line; consecutive rows with the same `order` value are one order (its lines in
 * row order). `name` (the order's name; the `order` value when left out) and `user_id` are read
 * from the first row and may be repeated, or left empty, on the others.
 */
const CSV_NOTE =
  'CSV: one row per line; consecutive rows with the same `order` value are one order (`name` defaults to it; `name` and `user_id` as on its first row). NDJSON: one order a line, the body of POST /v1/orders. Orders have no natural key: there is no on_conflict.';

export const ORDERS_IMPORT: ImportTarget<OrderCreate> = {
  name: 'orders',
  path: '/v1/orders',
  resource: 'orders',
  scopes: ['orders:create', 'users:read', 'items:read'],
  note: CSV_NOTE,
  example: { name: 'SO-1001', user_id: 1, lines: [{ item_id: 1, quantity: 2 }] },
  columns: ['order', 'name', 'user_id', 'item_id', 'quantity'],
  required: ['order', 'user_id', 'item_id', 'quantity'],
  schema: OrderCreateSchema,
  // Not used: an order is made of its rows (csvGroup).
  fromCsv: (cells) => ({ ...cells }),
  csvGroup: { by: 'order', member: 'lines', max: MAX_LINES, fromCsvRows: orderOfRows },
  recordPath: (id) => `/v1/orders/${id}`,
  // Each order spends from the caller's orders-create budget, as POST /v1/orders does.
  rateLimitBudget: 'orders-create',
  chunkRows: 100,
  write: writeOrders,
};

/** Orders placed between two turns of the event loop, so that requests are read meanwhile. */
const ORDERS_PER_TURN = 25;

async function writeOrders(
  trx: Trx,
  rows: readonly ImportRow<OrderCreate>[],
  context: ImportContext,
): Promise<ChunkReport> {
  const report = new ChunkReport();
  if (context.checking) {
    const items = new Set(rows.flatMap((row) => row.value.lines.map((line) => line.item_id)));
    await holdStockOfCheckedOrders(trx, new Map([...context.carried].filter(([itemId]) => items.has(itemId))));
  }
  let placed = 0;
  for (const { row, value } of rows) {
    try {
      const order = await withSavepoint(trx, 'import_order', () => placeOrder(trx, value, context.access));
      report.wrote(row, 'created', order.id);
      if (context.checking)
        for (const line of order.lines)
          context.carried.set(line.item_id, (context.carried.get(line.item_id) ?? 0) + line.quantity);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      refuse(report, row, error);
    }
    if (++placed % ORDERS_PER_TURN === 0 && context.turns) await turn();
  }
  return report;
}

/** An order refused as POST /v1/orders would refuse it: its problem type, the member concerned, its words. */
function refuse(report: ChunkReport, row: number, error: AppError): void {
  const pointer = error.errors?.[0]?.pointer ?? '#/lines';
  const [, field = null] = pointer.replace(/^#/, '').split('/');
  report.refused(row, field, error.type, error.message);
}

/** An order's CSV rows as the body of POST /v1/orders: its name and user from its first row, a line a row. */
function orderOfRows(
  rows: readonly Record<string, string>[],
): { value: Record<string, unknown> } | { field: string; detail: string } {
  const [first] = rows;
  const name = first?.name ?? first?.order;
  const userId = first?.user_id;
  for (const [index, cells] of rows.entries()) {
    for (const [column, value] of [
      ['name', name],
      ['user_id', userId],
    ] as const)
      if (index > 0 && cells[column] !== undefined && cells[column] !== value)
        return {
          field: column,
          detail: `the rows of order ${first?.order} give two values of ${column} (${value ?? 'none'} and ${cells[column]}); its rows after the first repeat it or leave it empty`,
        };
  }
  return {
    value: {
      name,
      ...integerCell(first ?? {}, 'user_id'),
      lines: rows.map((cells) => ({ ...integerCell(cells, 'item_id'), ...integerCell(cells, 'quantity') })),
    },
  };
}
