import type { Executor, StockMovementRow, StockRow } from '../../db/database.js';
import { MAX_COMPILED_ROWS, compiledPerCount, compiledQuery, rowsOf } from '../../db/compiled.js';
import { sql } from 'kysely';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import { compiledVisibleById, visibleIn, whereVisible, type Sight } from '../../db/visibility.js';

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

// Through the item, whose owner decides who sees its stock.
const selectStockByItem = compiledVisibleById('items', (db, itemId: number) =>
  db
    .selectFrom('stock')
    .innerJoin('items', 'items.id', 'stock.item_id')
    .select(STOCK_COLUMNS.map((column) => `stock.${column}` as const))
    .where('stock.item_id', '=', itemId),
);

export function insertStock(db: Executor, itemId: number, now: string): Promise<StoredStock> {
  return db
    .insertInto('stock')
    .values({ item_id: itemId, quantity: 0, reserved: 0, fulfilled: 0, version: 1, updated_at: now })
    .returning(STOCK_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** The stock of the item, when the item exists and the sight on items shows it. */
export async function findStock(db: Executor, itemId: number, sight: Sight): Promise<StoredStock | undefined> {
  const [stock] = await selectStockByItem(db, itemId, sight);
  return stock;
}

/** A page of the stock of the items the sight shows, by item. */
export function findStockPage(db: Executor, query: ListQuery, sight: Sight) {
  return fetchPage(
    whereVisible(
      db
        .selectFrom('stock')
        .innerJoin('items', 'items.id', 'stock.item_id')
        .select(STOCK_COLUMNS.map((column) => `stock.${column}` as const)),
      'items',
      sight,
    ),
    query,
  );
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

/** The item's movements; order_id only of an order the sight on orders shows (null otherwise). */
export function findMovements(db: Executor, itemId: number, query: ListQuery, orders: Sight) {
  const shown = visibleIn('orders', orders);
  const movements = db.selectFrom('stock_movements').select(MOVEMENT_COLUMNS).where('item_id', '=', itemId);
  if (shown === undefined) return fetchPage(movements, query);
  // The order ids are hidden before paging and filters see them, so ?order_id= of another's order finds nothing.
  const masked = db
    .selectFrom('stock_movements')
    .select(MOVEMENT_COLUMNS.filter((column) => column !== 'order_id'))
    .select(
      sql<
        number | null
      >`case when exists (select 1 from orders where orders.id = stock_movements.order_id and ${shown}) then stock_movements.order_id end`.as(
        'order_id',
      ),
    )
    .where('item_id', '=', itemId);
  return fetchPage(db.selectFrom(masked.as('stock_movements')).selectAll() as unknown as typeof movements, query);
}
