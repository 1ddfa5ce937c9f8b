import type { Executor, StockMovementRow, StockRow } from '../../db/database.js';
import { BULK_ROWS_PER_INSERT, compiledQuery, compiledRowInserts } from '../../db/compiled.js';
import { sql } from 'kysely';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import { compiledVisibleById, visibleIn, whereVisible, type Sight } from '../../db/visibility.js';

/**
 * Every query of an item's stock and of its ledger (stock_movements), but for the moves orders
 * make, which orders/placement.repository.ts writes with the order.
 */
const STOCK_COLUMNS = ['item_id', 'quantity', 'reserved', 'fulfilled', 'updated_at', 'version'] as const;
export type StoredStock = Pick<StockRow, (typeof STOCK_COLUMNS)[number]>;

/** The columns a ledger row is written with (its id is generated); placing an order writes them too. */
export const MOVEMENT_FIELDS = [
  'item_id',
  'kind',
  'quantity_change',
  'reserved_change',
  'quantity_after',
  'reserved_after',
  'order_id',
  'created_at',
] as const;
/** Their types on PostgreSQL. */
const MOVEMENT_TYPES = ['bigint', 'text', 'bigint', 'bigint', 'bigint', 'bigint', 'bigint', 'text'];
const MOVEMENT_COLUMNS = ['id', ...MOVEMENT_FIELDS] as const;

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

/** The stock rows of many new items at once (an import), each at its quantity; nothing comes back. */
export async function insertStocks(
  db: Executor,
  stocks: { item_id: number; quantity: number }[],
  now: string,
): Promise<void> {
  const values: unknown[] = [];
  for (const stock of stocks) values.push(stock.item_id, stock.quantity, 0, 0, 1, now);
  await insertStockRows(db, values);
}

const NEW_STOCK_FIELDS = ['item_id', 'quantity', 'reserved', 'fulfilled', 'version', 'updated_at'] as const;
const insertStockRows = compiledRowInserts(BULK_ROWS_PER_INSERT, {
  table: 'stock',
  columns: NEW_STOCK_FIELDS,
  types: ['bigint', 'bigint', 'bigint', 'bigint', 'integer', 'text'],
});

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

/** Sets the on-hand quantity if the stock is still at `version`. */
export async function setStockQuantityAtVersion(
  db: Executor,
  itemId: number,
  version: number,
  quantity: number,
  now: string,
): Promise<StoredStock | undefined> {
  const [stock] = await updateStockQuantityAtVersion(db, quantity, version + 1, now, itemId, version);
  return stock;
}

// Compiled once: a batch sets the stock of up to 1,000 items, each with this statement.
const updateStockQuantityAtVersion = compiledQuery(
  (db, quantity: number, nextVersion: number, now: string, itemId: number, version: number) =>
    db
      .updateTable('stock')
      .set({ quantity, version: nextVersion, updated_at: now })
      .where('item_id', '=', itemId)
      .where('version', '=', version)
      .returning(STOCK_COLUMNS),
);

/** A ledger entry to append: every column but the id. */
export type NewMovement = Omit<StockMovementRow, 'id'>;

/** Appends a ledger entry. An order's entries are written with its moves (orders/placement.repository.ts). */
export async function insertMovement(db: Executor, movement: NewMovement): Promise<void> {
  // A statement of one row, compiled once (a batch sets the stock of up to 1,000 items, each with its movement).
  await insertMovements(db, [movement]);
}

/** Appends many ledger entries in one statement (an import's chunk: up to a few hundred). */
export async function insertMovements(db: Executor, movements: NewMovement[]): Promise<void> {
  const values: unknown[] = [];
  // MOVEMENT_FIELDS' order, each read by its name (a loop over the names is a megamorphic load a value).
  for (const movement of movements)
    values.push(
      movement.item_id,
      movement.kind,
      movement.quantity_change,
      movement.reserved_change,
      movement.quantity_after,
      movement.reserved_after,
      movement.order_id,
      movement.created_at,
    );
  await insertMovementRows(db, values);
}

const insertMovementRows = compiledRowInserts(BULK_ROWS_PER_INSERT, {
  table: 'stock_movements',
  columns: MOVEMENT_FIELDS,
  types: MOVEMENT_TYPES,
});

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

/**
 * The on-hand quantity of many items at once (an import's on_conflict=update), each only while its
 * stock is at the version read: one UPDATE … FROM (VALUES …); the stock rows it changed come back.
 */
export async function setStockQuantitiesAtVersions(
  db: Executor,
  changes: readonly { item_id: number; version: number; quantity: number }[],
  now: string,
): Promise<StoredStock[]> {
  if (changes.length === 0) return [];
  const rows = changes.map((change, index) =>
    index === 0
      ? sql`(cast(${change.item_id} as bigint), cast(${change.version} as integer), cast(${change.quantity} as bigint))`
      : sql`(${change.item_id}, ${change.version}, ${change.quantity})`,
  );
  const { rows: set } = await sql<StoredStock>`update stock
    set quantity = changed.column3, version = stock.version + 1, updated_at = ${now}
    from (values ${sql.join(rows)}) as changed
    where stock.item_id = changed.column1 and stock.version = changed.column2
    returning ${sql.join(STOCK_COLUMNS.map((column) => sql.ref(`stock.${column}`)))}`.execute(db);
  return set;
}
