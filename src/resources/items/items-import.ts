import { setImmediate as turn } from 'node:timers/promises';
import Type, { type Static } from 'typebox';
import { creatorOf, sightOf } from '../../auth/visibility.js';
import type { Trx } from '../../db/database.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import {
  inSlices,
  integerCell,
  type ChunkOutcome,
  type ImportContext,
  type ImportTarget,
  type RowError,
  type RowWritten,
} from '../../engine/imports/target.js';
import { toMinorUnits } from './money.js';
import { findItemsBySkus, insertItems, updateItemsAtVersions, type StoredItem } from './items.repository.js';
import { ItemCreateSchema } from './items.schema.js';
import { presentItem } from './items.service.js';
import {
  findStocks,
  insertMovements,
  insertStocks,
  setStockQuantitiesAtVersions,
  type NewMovement,
} from './stock.repository.js';
import { StockQuantity } from './stock.schema.js';
import { stockEvents } from './stock.service.js';

/**
 * The catalogue import (docs/bulk.md "Imports"): a row is an item's create body with, optionally,
 * its stock `quantity`; a new SKU creates the item (and its stock, at that quantity, with a `set`
 * movement), a SKU already stored follows on_conflict (update: name, price and quantity as the row
 * says). A chunk is a few statements whatever its size: one read of the SKUs, one insert of the
 * new items, one of their stock, one of the movements, one of the events.
 */
const ItemImportRow = Type.Object(
  { ...ItemCreateSchema.properties, quantity: Type.Optional(StockQuantity) },
  { additionalProperties: false, title: 'ItemImportRow' },
);
type Row = Static<typeof ItemImportRow>;

export const ITEMS_IMPORT: ImportTarget = {
  name: 'items',
  path: '/v1/items',
  resource: 'items',
  scopes: ['items:create', 'items:update', 'stock:update'],
  example: { sku: 'WID-1', name: 'Widget', price: '2.50', quantity: 100 },
  columns: ['sku', 'name', 'price', 'quantity'],
  required: ['sku', 'name', 'price'],
  schema: ItemImportRow,
  fromCsv: (cells) => ({ ...cells, ...integerCell(cells, 'quantity') }),
  keyOf: (row: Row) => row.sku,
  keyField: 'sku',
  recordPath: (id) => `/v1/items/${id}`,
  write: (trx, rows, context) => writeItems(trx, rows as unknown as { row: number; value: Row }[], context),
};

async function writeItems(
  trx: Trx,
  rows: readonly { row: number; value: Row }[],
  context: ImportContext,
): Promise<ChunkOutcome> {
  const stored = new Map(
    (
      await findItemsBySkus(
        trx,
        rows.map((row) => row.value.sku),
        sightOf(context.access, 'items'),
      )
    ).map((item) => [item.sku, item]),
  );
  const creator = creatorOf(context.access, 'items');
  const written: RowWritten[] = [];
  const errors: RowError[] = [];
  const fresh: { row: number; value: Row }[] = [];
  const changed: { row: number; value: Row; item: StoredItem }[] = [];
  for (const row of rows) {
    const item = stored.get(row.value.sku);
    if (item === undefined) fresh.push(row);
    // An item the importer cannot see is one it would create, whose SKU is taken: as POST /v1/items answers.
    else if (!item.visible) errors.push(skuTaken(row.row, row.value.sku));
    else if (context.onConflict === 'skip') written.push({ row: row.row, outcome: 'skipped' });
    else if (context.onConflict === 'error') errors.push(skuTaken(row.row, row.value.sku));
    else changed.push({ ...row, item });
  }
  const events: EventDraft[] = [];
  const movements: NewMovement[] = [];
  if (fresh.length > 0) {
    // A slice at a time, the event loop given a turn between: requests are read and answered meanwhile.
    const inserted = await inSlices(trx, context, fresh, (slice) =>
      insertItems(
        trx,
        slice.map(({ value }) => ({
          name: value.name,
          sku: value.sku,
          price: toMinorUnits(value.price),
          created_by: creator,
        })),
        context.now,
      ),
    );
    await turn();
    const bySku = new Map(inserted.map((item) => [item.sku, item]));
    const stocks: { item_id: number; quantity: number }[] = [];
    for (const row of fresh) {
      const item = bySku.get(row.value.sku);
      // Not inserted: a concurrent request took the SKU after the read (PostgreSQL).
      if (item === undefined) {
        errors.push(skuTaken(row.row, row.value.sku));
        continue;
      }
      const quantity = row.value.quantity ?? 0;
      stocks.push({ item_id: item.id, quantity });
      events.push({ type: 'item.created', path: `/v1/items/${item.id}`, data: presentItem(item) });
      if (quantity > 0) movements.push(setMovement(item.id, quantity, quantity, 0, context.now));
      written.push({ row: row.row, outcome: 'created', id: item.id });
    }
    await inSlices(trx, context, stocks, (slice) => insertStocks(trx, slice, context.now));
    await turn();
  }
  if (changed.length > 0) await updateChanged(trx, changed, context, { written, errors, events, movements });
  await inSlices(trx, context, movements, (slice) => insertMovements(trx, slice));
  events.push(...stockEvents(movements));
  await turn();
  await inSlices(trx, context, events, (slice) => recordEvents(trx, slice));
  return { written, errors };
}

/**
 * Existing items a row updates (on_conflict=update): their fields, then their stock quantity, each
 * only when it differs, set-based: one UPDATE of the items and one of their stock a slice, each row
 * only at the version read (an item another writer changed meanwhile is refused, and its stock left).
 */
async function updateChanged(
  trx: Trx,
  changed: { row: number; value: Row; item: StoredItem }[],
  context: ImportContext,
  out: { written: RowWritten[]; errors: RowError[]; events: EventDraft[]; movements: NewMovement[] },
): Promise<void> {
  const stocks = new Map(
    (
      await findStocks(
        trx,
        changed.map((row) => row.item.id),
      )
    ).map((stock) => [stock.item_id, stock]),
  );
  const fields = changed
    .map(({ value, item }) => ({
      id: item.id,
      version: item.version,
      name: value.name,
      price: toMinorUnits(value.price),
    }))
    .filter(
      (change, index) => change.name !== changed[index]!.item.name || change.price !== changed[index]!.item.price,
    );
  const wanted = new Set(fields.map((change) => change.id));
  const updated = new Map(
    (await inSlices(trx, context, fields, (slice) => updateItemsAtVersions(trx, slice, context.now))).map((item) => [
      item.id,
      item,
    ]),
  );
  const refused = new Set([...wanted].filter((id) => !updated.has(id)));
  const quantities = changed.flatMap(({ value, item }) => {
    const stock = stocks.get(item.id);
    return value.quantity === undefined ||
      stock === undefined ||
      value.quantity === stock.quantity ||
      refused.has(item.id)
      ? []
      : [{ item_id: item.id, version: stock.version, quantity: value.quantity }];
  });
  const set = new Map(
    (await inSlices(trx, context, quantities, (slice) => setStockQuantitiesAtVersions(trx, slice, context.now))).map(
      (stock) => [stock.item_id, stock],
    ),
  );
  for (const { row, value, item } of changed) {
    if (refused.has(item.id)) {
      out.errors.push({
        row,
        field: 'sku',
        problem: 'precondition-failed',
        detail: `item ${item.id} changed while the import ran; retry`,
      });
      continue;
    }
    const itemUpdated = updated.get(item.id);
    if (itemUpdated !== undefined)
      out.events.push({ type: 'item.updated', path: `/v1/items/${item.id}`, data: presentItem(itemUpdated) });
    const stockSet = set.get(item.id);
    if (stockSet !== undefined)
      out.movements.push(
        setMovement(
          item.id,
          value.quantity! - stocks.get(item.id)!.quantity,
          stockSet.quantity,
          stockSet.reserved,
          context.now,
        ),
      );
    const touched = itemUpdated !== undefined || stockSet !== undefined;
    out.written.push({ row, outcome: touched ? 'updated' : 'skipped', id: item.id });
  }
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

const skuTaken = (row: number, sku: string): RowError => ({
  row,
  field: 'sku',
  problem: 'sku-taken',
  detail: `another item already has the SKU ${sku}`,
});
