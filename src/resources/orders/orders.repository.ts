import type { Executor, OrderLineRow, OrderRow, OrderStatus } from '../../db/database.js';
import { sql } from 'kysely';
import { MAX_COMPILED_ROWS, compiledPerCount, compiledQuery, rowsOf } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';

export const ORDER_COLUMNS = [
  'id',
  'name',
  'user_id',
  'status',
  'total',
  'created_at',
  'updated_at',
  'version',
] as const;
export type StoredOrder = Pick<OrderRow, (typeof ORDER_COLUMNS)[number]>;
export type StoredLine = Pick<OrderLineRow, 'order_id' | 'item_id' | 'position' | 'quantity' | 'unit_price'>;

const selectOrderById = compiledQuery((db, id: number) =>
  db.selectFrom('orders').select(ORDER_COLUMNS).where('id', '=', id),
);
const selectLinesOfOrder = compiledQuery((db, orderId: number) =>
  db
    .selectFrom('order_lines')
    .select(['order_id', 'item_id', 'position', 'quantity', 'unit_price'])
    .where('order_id', '=', orderId)
    .orderBy('position'),
);

export async function findOrderById(db: Executor, id: number): Promise<StoredOrder | undefined> {
  const [order] = await selectOrderById(db, id);
  return order;
}

export function findOrders(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('orders').select(ORDER_COLUMNS), query);
}

export function findLines(db: Executor, orderId: number): Promise<StoredLine[]> {
  return selectLinesOfOrder(db, orderId);
}

/** The lines of several orders (one page), in order and line position. */
export function findLinesOfOrders(db: Executor, orderIds: number[]): Promise<StoredLine[]> {
  if (orderIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('order_lines')
    .select(['order_id', 'item_id', 'position', 'quantity', 'unit_price'])
    .where('order_id', 'in', orderIds)
    .orderBy('order_id')
    .orderBy('position')
    .execute();
}

// The statements of placing an order, compiled once (per line count for the lines).
const insertPlacedOrderRow = compiledQuery((db, name: string, userId: number, total: number, now: string) =>
  db
    .insertInto('orders')
    .values({
      name,
      user_id: userId,
      status: sql.lit('placed'),
      total,
      version: sql.lit(1),
      created_at: now,
      updated_at: now,
    })
    .returning(ORDER_COLUMNS),
);
const LINE_FIELDS = [
  'order_id',
  'item_id',
  'position',
  'quantity',
  'unit_price',
] as const satisfies readonly (keyof StoredLine)[];
const insertLineRows = compiledPerCount(MAX_COMPILED_ROWS, (db, _count, ...values) =>
  db.insertInto('order_lines').values(rowsOf<StoredLine>(values, LINE_FIELDS)),
);

export async function insertOrder(
  db: Executor,
  order: { name: string; user_id: number; total: number; now: string },
): Promise<StoredOrder> {
  const [stored] = await insertPlacedOrderRow(db, order.name, order.user_id, order.total, order.now);
  if (stored === undefined) throw new Error('inserting an order returned no row');
  return stored;
}

export async function insertLines(db: Executor, lines: StoredLine[]): Promise<void> {
  if (lines.length > 0)
    await insertLineRows(db, lines.length, ...lines.flatMap((line) => LINE_FIELDS.map((field) => line[field])));
}

export async function deleteLines(db: Executor, orderId: number): Promise<void> {
  await db.deleteFrom('order_lines').where('order_id', '=', orderId).execute();
}

/** Writes the order's new state if it is still at `version`; undefined when it is not. */
export function updateOrderAtVersion(
  db: Executor,
  id: number,
  version: number,
  changes: { name: string; user_id: number | null; status: OrderStatus; total: number; now: string },
): Promise<StoredOrder | undefined> {
  return db
    .updateTable('orders')
    .set({
      name: changes.name,
      user_id: changes.user_id,
      status: changes.status,
      total: changes.total,
      version: version + 1,
      updated_at: changes.now,
    })
    .where('id', '=', id)
    .where('version', '=', version)
    .returning(ORDER_COLUMNS)
    .executeTakeFirst();
}

export async function hasPlacedOrders(db: Executor, userId: number): Promise<boolean> {
  const order = await db
    .selectFrom('orders')
    .select('id')
    .where('user_id', '=', userId)
    .where('status', '=', 'placed')
    .limit(1)
    .executeTakeFirst();
  return order !== undefined;
}
