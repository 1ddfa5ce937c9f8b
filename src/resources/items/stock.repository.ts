import type { Executor, StockMovementRow, StockRow } from '../../db/database.js';
import { MAX_COMPILED_ROWS, compiledPerCount, compiledQuery, rowsOf } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';

/** Every query of an item's stock and of its ledger (stock_movements). */
const STOCK_COLUMNS = ['item_id', 'quantity', 'reserved', 'fulfilled', 'updated_at', 'version'] as const;
export type StoredStock = Pick<StockRow, (typeof STOCK_COLUMNS)[number]>;

const MOVEMENT_COLUMNS = [
  'id',
  'item_id',
  'kind',
  'quantity_change',
  'reserved_change',
  'quantity_after',
  'reserved_after',
  'order_id',
  'created_at',
] as const;

const selectStockByItem = compiledQuery((db, itemId: number) =>
  db.selectFrom('stock').select(STOCK_COLUMNS).where('item_id', '=', itemId),
);

export function insertStock(db: Executor, itemId: number, now: string): Promise<StoredStock> {
  return db
    .insertInto('stock')
    .values({ item_id: itemId, quantity: 0, reserved: 0, fulfilled: 0, version: 1, updated_at: now })
    .returning(STOCK_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function findStock(db: Executor, itemId: number): Promise<StoredStock | undefined> {
  const [stock] = await selectStockByItem(db, itemId);
  return stock;
}

export function findStocks(db: Executor, itemIds: number[]): Promise<StoredStock[]> {
  return db.selectFrom('stock').select(STOCK_COLUMNS).where('item_id', 'in', itemIds).execute();
}

/**
 * Moves stock by the given amounts in one conditional UPDATE: it applies only while the result
 * keeps quantity and reserved ≥ 0, so stock can never be oversold or go negative, whatever runs
 * concurrently (correct on SQLite and PostgreSQL alike). Undefined when the condition failed.
 */
export async function moveStock(
  db: Executor,
  itemId: number,
  change: { quantity: number; reserved: number; fulfilled: number; now: string },
): Promise<StoredStock | undefined> {
  const [moved] = await updateStockBy(
    db,
    itemId,
    change.quantity,
    change.reserved,
    change.fulfilled,
    change.now,
    -change.quantity,
    -change.reserved,
  );
  return moved;
}

// Compiled once (every order line runs it): building the statement costs more than SQLite takes to run it.
const updateStockBy = compiledQuery(
  (
    db,
    itemId: number,
    quantity: number,
    reserved: number,
    fulfilled: number,
    now: string,
    leastQuantity: number,
    leastReserved: number,
  ) =>
    db
      .updateTable('stock')
      .set((eb) => ({
        quantity: eb('quantity', '+', quantity),
        reserved: eb('reserved', '+', reserved),
        fulfilled: eb('fulfilled', '+', fulfilled),
        version: eb('version', '+', eb.lit(1)),
        updated_at: now,
      }))
      .where('item_id', '=', itemId)
      .where('quantity', '>=', leastQuantity)
      .where('reserved', '>=', leastReserved)
      .returning(STOCK_COLUMNS),
);

/** Sets the on-hand quantity if the stock is still at `version`. */
export function setStockQuantityAtVersion(
  db: Executor,
  itemId: number,
  version: number,
  quantity: number,
  now: string,
): Promise<StoredStock | undefined> {
  return db
    .updateTable('stock')
    .set({ quantity, version: version + 1, updated_at: now })
    .where('item_id', '=', itemId)
    .where('version', '=', version)
    .returning(STOCK_COLUMNS)
    .executeTakeFirst();
}

/** A ledger entry to append: every column but the id. */
export type NewMovement = Omit<StockMovementRow, 'id'>;

const NEW_MOVEMENT_FIELDS = [
  'item_id',
  'kind',
  'quantity_change',
  'reserved_change',
  'quantity_after',
  'reserved_after',
  'order_id',
  'created_at',
] as const satisfies readonly (keyof NewMovement)[];
/** One statement for all the movements, compiled once per count (an order's lines are few). */
const insertMovementRows = compiledPerCount(MAX_COMPILED_ROWS, (db, _count, ...values) =>
  db.insertInto('stock_movements').values(rowsOf<NewMovement>(values, NEW_MOVEMENT_FIELDS)),
);

export async function insertMovements(db: Executor, movements: NewMovement[]): Promise<void> {
  if (movements.length > 0)
    await insertMovementRows(
      db,
      movements.length,
      ...movements.flatMap((movement) => NEW_MOVEMENT_FIELDS.map((field) => movement[field])),
    );
}

export function findMovements(db: Executor, itemId: number, query: ListQuery) {
  return fetchPage(db.selectFrom('stock_movements').select(MOVEMENT_COLUMNS).where('item_id', '=', itemId), query);
}
