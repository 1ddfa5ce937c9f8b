import { nowTimestamp } from '../../db/clock.js';
import type { Executor, MovementKind, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError, UnprocessableError } from '../../errors.js';
import type { VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertEchoesMatch,
  sameInstant,
  withRowLocked,
  VERSION_MOVED,
  written,
} from '../../engine/preconditions.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import {
  findMovements,
  findStock,
  findStockPage,
  findStocks,
  insertMovement,
  setStockQuantityAtVersion,
  type NewMovement,
  type StoredStock,
} from './stock.repository.js';
import { ITEMS, itemNotFound } from './items.service.js';
import type { StockChange } from './stock.schema.js';

/**
 * Stock and its ledger. Every change of an item's quantity or reserved count writes a movement in
 * the same transaction, so the ledger always sums to the stock: a level set by hand here, an
 * order's moves with the order (orders/placement.repository.ts).
 */
export type { StoredStock };

/** The stock of an item; 404 when the item does not exist, or the sight on items does not show it. */
export async function getStock(db: Executor, itemId: number, sight: Sight): Promise<StoredStock> {
  const stock = await findStock(db, itemId, sight);
  if (!stock) throw itemNotFound(itemId);
  return stock;
}

/** The stock of the items the sight on items shows, a page at a time (many items' stock in one call by ?id=). */
export function listStock(db: Executor, query: ListQuery, sight: Sight) {
  return findStockPage(db, query, sight);
}

/** PUT / PATCH of stock: sets the on-hand quantity; reserved is the orders' business. */
export async function setStock(
  trx: Trx,
  itemId: number,
  change: StockChange,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredStock> {
  return writeQuantity(trx, itemId, condition, sight, (stored) => {
    assertStockEchoes(stored, change);
    return change.quantity ?? stored.quantity;
  });
}

/** The most units one item's stock holds (StockQuantity in stock.schema.ts). */
const MAX_QUANTITY = 1_000_000_000_000;

/**
 * Adds `by` units (negative: takes them) to the on-hand quantity, as a `set` movement of that
 * change: a delivery received, a count corrected, without reading the quantity first. Below 0 is
 * 409 insufficient-stock; past the largest quantity, 422.
 */
export async function adjustStock(
  trx: Trx,
  itemId: number,
  by: number,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredStock> {
  return writeQuantity(trx, itemId, condition, sight, (stored) => {
    const quantity = stored.quantity + by;
    if (quantity < 0) {
      throw new ConflictError(
        'insufficient-stock',
        `Item ${itemId} has ${unitsOf(stored.quantity)} on hand (not reserved); adjusting by ${by} would leave fewer than none, so nothing was changed.`,
        { short_lines: [{ item_id: itemId, requested: -by, available: stored.quantity }] },
      );
    }
    if (quantity > MAX_QUANTITY) {
      throw new UnprocessableError(
        `Item ${itemId} has ${unitsOf(stored.quantity)} on hand; adjusting by ${by} would pass the most a stock holds (${MAX_QUANTITY}).`,
        [{ in: 'body', pointer: '#/by', detail: `would bring the quantity past ${MAX_QUANTITY}` }],
      );
    }
    return quantity;
  });
}

/** Sets the on-hand quantity to what `wanted` decides from the stored stock (after If-Match), with its `set` movement and event. */
function writeQuantity(
  trx: Trx,
  itemId: number,
  condition: VersionCondition,
  sight: Sight,
  wanted: (stored: StoredStock) => number,
): Promise<StoredStock> {
  return withRowLocked(
    trx,
    { table: 'stock', id: itemId },
    async () => {
      const stored = await getStock(trx, itemId, sight);
      assertCondition(condition, stored.version, `The stock of item ${itemId}`);
      const quantity = wanted(stored);
      if (quantity === stored.quantity) return written(stored);
      const now = nowTimestamp();
      const updated = await setStockQuantityAtVersion(trx, itemId, stored.version, quantity, now);
      if (!updated) return VERSION_MOVED;
      const set = movement(updated, 'set', updated.quantity - stored.quantity, 0, null, now);
      await insertMovement(trx, set);
      await recordEvents(trx, stockEvents([set]));
      return written(updated);
    },
    `The stock of item ${itemId}`,
  );
}

/**
 * The ledger of an item the sight on items shows. A movement names the order that caused it only
 * when the sight on orders shows that order; otherwise its order_id is null, as for a set.
 */
export async function listMovements(
  db: Executor,
  itemId: number,
  query: ListQuery,
  sights: { items: Sight; orders: Sight },
) {
  if (!(await ITEMS.queries.findById(db, itemId, sights.items))) throw itemNotFound(itemId);
  return findMovements(db, itemId, query, sights.orders);
}

/** A stock.changed event for each movement: the stock after it, and the movement. */
export function stockEvents(movements: readonly NewMovement[]): EventDraft[] {
  return movements.map((moved) => ({
    type: 'stock.changed',
    path: `/v1/items/${moved.item_id}/stock`,
    data: {
      item_id: moved.item_id,
      quantity: moved.quantity_after,
      reserved: moved.reserved_after,
      updated_at: moved.created_at,
      movement: {
        kind: moved.kind,
        quantity_change: moved.quantity_change,
        reserved_change: moved.reserved_change,
        order_id: moved.order_id,
      },
    },
  }));
}

/** Stock of the given items, by item id. */
export async function stockByItem(db: Executor, itemIds: number[]): Promise<Map<number, StoredStock>> {
  return new Map((await findStocks(db, itemIds)).map((stock) => [stock.item_id, stock]));
}

function movement(
  after: StoredStock,
  kind: MovementKind,
  quantityChange: number,
  reservedChange: number,
  orderId: number | null,
  now: string,
): NewMovement {
  return {
    item_id: after.item_id,
    kind,
    quantity_change: quantityChange,
    reserved_change: reservedChange,
    quantity_after: after.quantity,
    reserved_after: after.reserved,
    order_id: orderId,
    created_at: now,
  };
}

/** Read-only stock fields in a PUT/PATCH body must equal the stored ones (docs/conventions.md). */
function assertStockEchoes(stored: StoredStock, body: StockChange): void {
  assertEchoesMatch([
    ...(body.item_id !== undefined && body.item_id !== stored.item_id ? ['item_id'] : []),
    ...(body.reserved !== undefined && body.reserved !== stored.reserved ? ['reserved'] : []),
    ...(sameInstant(body.updated_at, stored.updated_at) ? [] : ['updated_at']),
  ]);
}

const unitsOf = (count: number) => `${count} ${count === 1 ? 'unit' : 'units'}`;
