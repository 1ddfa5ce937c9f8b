import { setImmediate as turn } from 'node:timers/promises';
import Type, { type Static } from 'typebox';
import type { Trx } from '../../db/database.js';
import { recordImport, type AlsoWritten, type RecordWritten } from '../../engine/imports/record-import.js';
import { inSlices, integerCell, type ImportContext } from '../../engine/imports/target.js';
import { findItemsBySkus, insertItems, updateItemsAtVersions, type StoredItem } from './items.repository.js';
import { ITEM } from './items.schema.js';
import { ITEMS } from './items.service.js';
import {
  findStocks,
  insertMovements,
  insertStocks,
  setStockQuantitiesAtVersions,
  type NewMovement,
} from './stock.repository.js';
import { StockQuantity } from './stock.schema.js';
import { stockEvents } from './stock.service.js';

const ItemImportRow = Type.Object(
  { ...ITEM.create.properties, quantity: Type.Optional(StockQuantity) },
  { additionalProperties: false, title: 'ItemImportRow' },
);
type ItemImportValue = Static<typeof ItemImportRow>;

/**
 * The catalogue import (docs/bulk.md "Imports"): a row is an item's create body with, optionally,
 * its stock `quantity`; a new SKU creates the item (and its stock, at that quantity, with a `set`
 * movement), a SKU already stored follows on_conflict (update: name, price and quantity as the row
 * says; a row whose item is unchanged but whose quantity differs updates the stock alone). Its
 * chunks are written with the items' compiled multi-row statements, and the stock with one insert
 * of the new items' stock, one read and one UPDATE … FROM (VALUES …) of the stored ones', and one
 * insert of the movements.
 */
export const ITEMS_IMPORT = recordImport(ITEMS, {
  scopes: ['items:create', 'items:update', 'stock:update'],
  example: { sku: 'WID-1', name: 'Widget', price: '2.50', quantity: 100 },
  columns: ['sku', 'name', 'price', 'quantity'],
  required: ['sku', 'name', 'price'],
  schema: ItemImportRow,
  fromCsv: (cells) => ({ ...cells, ...integerCell(cells, 'quantity') }),
  bulk: { findByKeys: findItemsBySkus, insert: insertItems, updateAtVersions: updateItemsAtVersions },
  alsoWrites: writeStock,
});

/**
 * The stock of a chunk's items: a new item's at the row's quantity (0 when it names none), a stored
 * item's set to it when it names one that differs, only while the stock is at the version read (one
 * another writer changed meanwhile is left as it is); each with its `set` movement and event.
 */
async function writeStock(
  trx: Trx,
  rows: readonly RecordWritten<StoredItem, ItemImportValue>[],
  context: ImportContext,
): Promise<AlsoWritten> {
  const created = rows.filter((row) => row.outcome === 'created');
  const stored = rows.filter((row) => row.outcome !== 'created' && row.value.quantity !== undefined);
  const movements: NewMovement[] = [];
  const changed = new Set<number>();
  if (created.length > 0) {
    const stocks = created.map(({ record, value }) => ({ item_id: record.id, quantity: value.quantity ?? 0 }));
    await inSlices(trx, context, stocks, (slice) => insertStocks(trx, slice, context.now));
    for (const { item_id, quantity } of stocks)
      if (quantity > 0) movements.push(setMovement(item_id, quantity, quantity, 0, context.now));
    await turn();
  }
  if (stored.length > 0) {
    const before = new Map(
      (
        await findStocks(
          trx,
          stored.map((row) => row.record.id),
        )
      ).map((stock) => [stock.item_id, stock]),
    );
    const quantities = stored.flatMap(({ value, record }) => {
      const stock = before.get(record.id);
      return stock === undefined || stock.quantity === value.quantity
        ? []
        : [{ item_id: record.id, version: stock.version, quantity: value.quantity! }];
    });
    const set = new Map(
      (await inSlices(trx, context, quantities, (slice) => setStockQuantitiesAtVersions(trx, slice, context.now))).map(
        (stock) => [stock.item_id, stock],
      ),
    );
    for (const { row, value, record } of stored) {
      const stock = set.get(record.id);
      if (stock === undefined) continue;
      const change = value.quantity! - before.get(record.id)!.quantity;
      movements.push(setMovement(record.id, change, stock.quantity, stock.reserved, context.now));
      changed.add(row);
    }
  }
  await inSlices(trx, context, movements, (slice) => insertMovements(trx, slice));
  await turn();
  return { events: stockEvents(movements), changed };
}

function setMovement(itemId: number, change: number, after: number, reserved: number, now: string): NewMovement {
  return {
    item_id: itemId,
    kind: 'set',
    quantity_change: change,
    reserved_change: 0,
    quantity_after: after,
    reserved_after: reserved,
    order_id: null,
    created_at: now,
  };
}
