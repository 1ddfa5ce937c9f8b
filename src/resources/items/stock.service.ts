import { nowTimestamp } from '../../db/clock.js';
import type { Executor, MovementKind, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { SEES_ALL, type Sight } from '../../db/visibility.js';
import { ConflictError, UnprocessableError } from '../../errors.js';
import type { VersionCondition } from '../../http/records.js';
import { assertCondition, assertEchoesMatch, sameInstant, withRowLocked } from '../preconditions.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import { findItemById } from './items.repository.js';
import {
  findMovements,
  findStock,
  findStockPage,
  findStocks,
  insertMovements,
  moveStock,
  setStockQuantityAtVersion,
  type NewMovement,
  type StoredStock,
} from './stock.repository.js';
import { itemNotFound } from './items.service.js';
import type { StockChange } from './stock.schema.js';
import { insufficientStock, type StockMove } from './stock-moves.js';

/**
 * Stock and its ledger. Every change of an item's quantity or reserved count goes through this
 * module and writes a movement in the same transaction, so the ledger always sums to the stock.
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
        `Item ${itemId} has ${stored.quantity} units on hand (not reserved); adjusting by ${by} would leave fewer than none, so nothing was changed.`,
        { short_lines: [{ item_id: itemId, requested: -by, available: stored.quantity }] },
      );
    }
    if (quantity > MAX_QUANTITY) {
      throw new UnprocessableError(
        `Item ${itemId} has ${stored.quantity} units on hand; adjusting by ${by} would pass the most a stock holds (${MAX_QUANTITY}).`,
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
      if (quantity === stored.quantity) return stored;
      const now = nowTimestamp();
      const updated = await setStockQuantityAtVersion(trx, itemId, stored.version, quantity, now);
      if (!updated) return undefined;
      const set = movement(updated, 'set', updated.quantity - stored.quantity, 0, null, now);
      await insertMovements(trx, [set]);
      await recordEvents(trx, stockEvents([set]));
      return updated;
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
  if (!(await findItemById(db, itemId, sights.items))) throw itemNotFound(itemId);
  return findMovements(db, itemId, query, sights.orders);
}

/**
 * Applies an order's stock moves and records them against the order, in the caller's
 * transaction. Each move is one conditional UPDATE, so a reserve that stock cannot cover
 * changes nothing; the caller has checked availability first (to list every short line), so a
 * failure here means a concurrent writer took the stock in between (possible on PostgreSQL),
 * and the whole transaction is abandoned with the same 409 (with the stock available only when
 * `showsAvailable`: the caller may read stock).
 */
export async function applyStockMoves(
  trx: Trx,
  orderId: number,
  moves: StockMove[],
  now: string,
  showsAvailable = false,
): Promise<void> {
  const movements: NewMovement[] = [];
  // Rows are always locked in item order, so two concurrent orders can never deadlock (PostgreSQL).
  for (const move of [...moves].sort((a, b) => a.itemId - b.itemId)) {
    const change = CHANGES[move.kind](move.units);
    const moved = await moveStock(trx, move.itemId, { ...change, now });
    if (!moved) {
      const stock = await findStock(trx, move.itemId, SEES_ALL);
      // No stock row: the item was deleted by a transaction that committed after this one read it (PostgreSQL).
      if (stock === undefined)
        throw new ConflictError(
          'concurrent-change',
          `Item ${move.itemId} was deleted while this request ran; nothing was changed.`,
        );
      throw insufficientStock(
        [{ item_id: move.itemId, requested: move.units, available: stock.quantity }],
        showsAvailable,
      );
    }
    movements.push(movement(moved, move.kind, change.quantity, change.reserved, orderId, now));
  }
  await insertMovements(trx, movements);
  await recordEvents(trx, stockEvents(movements));
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

/** How each kind of move changes the three counters. */
const CHANGES: Record<StockMove['kind'], (units: number) => { quantity: number; reserved: number; fulfilled: number }> =
  {
    reserve: (units) => ({ quantity: -units, reserved: units, fulfilled: 0 }),
    release: (units) => ({ quantity: units, reserved: -units, fulfilled: 0 }),
    fulfil: (units) => ({ quantity: 0, reserved: -units, fulfilled: units }),
  };

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

/** Read-only stock fields in a PUT/PATCH body must equal the stored ones (docs/guide.md "Conventions"). */
function assertStockEchoes(stored: StoredStock, body: StockChange): void {
  assertEchoesMatch([
    ...(body.item_id !== undefined && body.item_id !== stored.item_id ? ['item_id'] : []),
    ...(body.reserved !== undefined && body.reserved !== stored.reserved ? ['reserved'] : []),
    ...(sameInstant(body.updated_at, stored.updated_at) ? [] : ['updated_at']),
  ]);
}
