import Type, { type Static } from 'typebox';
import { sightOf } from '../../auth/visibility.js';
import type { Trx } from '../../db/database.js';
import { Id } from '../../http/schemas.js';
import { recordEvents } from '../../outbox/outbox.js';
import { ChunkReport, integerCell } from '../../engine/imports/target.js';
import type { ImportContext, ImportRow, ImportTarget } from '../../engine/imports/target.js';
import { findItemsBySkus, findVisibleItemIds } from './items.repository.js';
import { Sku } from './items.schema.js';
import { findStocks, insertMovements, setStockQuantityAtVersion, type NewMovement } from './stock.repository.js';
import { StockQuantity } from './stock.schema.js';
import { stockEvents } from './stock.service.js';

/**
 * The stock levels import (docs/bulk.md "Imports"): a row sets the on-hand quantity of one item,
 * named by `item_id` or by `sku`, as PUT /v1/items/{id}/stock does, with its `set` movement and
 * stock.changed event; a level already at that quantity changes nothing (skipped).
 */
const StockImportRow = Type.Object(
  { item_id: Type.Optional(Id), sku: Type.Optional(Sku), quantity: StockQuantity },
  { additionalProperties: false, title: 'StockImportRow' },
);
type Row = Static<typeof StockImportRow>;

export const STOCK_IMPORT: ImportTarget<Row> = {
  name: 'stock',
  path: '/v1/items/stock',
  resource: 'stock',
  scopes: ['stock:update', 'items:read'],
  example: { sku: 'WID-1', quantity: 100 },
  columns: ['item_id', 'sku', 'quantity'],
  required: ['quantity'],
  schema: StockImportRow,
  fromCsv: (cells) => ({ ...cells, ...integerCell(cells, 'item_id'), ...integerCell(cells, 'quantity') }),
  keyOf: (row) => (row.item_id === undefined ? `sku:${row.sku ?? ''}` : `id:${row.item_id}`),
  keyField: 'item',
  recordPath: (id) => `/v1/items/${id}/stock`,
  write: writeLevels,
};

async function writeLevels(trx: Trx, rows: readonly ImportRow<Row>[], context: ImportContext): Promise<ChunkReport> {
  const report = new ChunkReport();
  const skus = rows
    .filter((row) => row.value.item_id === undefined && row.value.sku !== undefined)
    .map((row) => row.value.sku!);
  // What the importer sees of items, as PUT /v1/items/{id}/stock sees it: an item it cannot see is one that does not exist.
  const sight = sightOf(context.access, 'items');
  const items = await findItemsBySkus(trx, skus, sight);
  const idOfSku = new Map(items.filter((item) => item.visible).map((item) => [item.sku, item.id]));
  const resolved: { row: number; itemId: number; quantity: number }[] = [];
  for (const { row, value } of rows) {
    if ((value.item_id === undefined) === (value.sku === undefined)) {
      report.refused(row, 'item_id', 'validation-failed', 'name the item by item_id or by sku (one of them)');
      continue;
    }
    const itemId = value.item_id ?? idOfSku.get(value.sku!);
    if (itemId === undefined) {
      report.refused(row, 'sku', 'unknown-reference', `there is no item with the SKU ${value.sku}`);
      continue;
    }
    resolved.push({ row, itemId, quantity: value.quantity });
  }
  const stocks = new Map(
    (
      await findStocks(
        trx,
        resolved.map((row) => row.itemId),
      )
    ).map((stock) => [stock.item_id, stock]),
  );
  const visible = await findVisibleItemIds(trx, [...stocks.keys()], sight);
  const movements: NewMovement[] = [];
  for (const { row, itemId, quantity } of resolved) {
    const stock = stocks.get(itemId);
    if (stock === undefined || !visible.has(itemId)) {
      report.refused(row, 'item_id', 'unknown-reference', `there is no item ${itemId}`);
      continue;
    }
    if (stock.quantity === quantity) {
      report.wrote(row, 'skipped', itemId);
      continue;
    }
    const set = await setStockQuantityAtVersion(trx, itemId, stock.version, quantity, context.now);
    if (set === undefined) {
      report.refused(
        row,
        'quantity',
        'precondition-failed',
        `the stock of item ${itemId} changed while the import ran; retry`,
      );
      continue;
    }
    stocks.set(itemId, set);
    movements.push({
      item_id: itemId,
      kind: 'set',
      quantity_change: quantity - stock.quantity,
      reserved_change: 0,
      quantity_after: set.quantity,
      reserved_after: set.reserved,
      order_id: null,
      created_at: context.now,
    });
    report.wrote(row, 'updated', itemId);
  }
  await insertMovements(trx, movements);
  await recordEvents(trx, stockEvents(movements));
  return report;
}
