import type { Executor, OrderLineRow, OrderRow, OrderStatus } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import { compiledVisibleById, whereVisible, type Sight } from '../../db/visibility.js';

/**
 * The queries of orders and their lines, but for placing an order and changing its lines and its
 * hold on stock, which are placement.repository.ts's.
 */
export const ORDER_COLUMNS = [
  'id',
  'name',
  'user_id',
  'status',
  'total',
  'created_by',
  'created_at',
  'updated_at',
  'version',
] as const;
export type StoredOrder = Pick<OrderRow, (typeof ORDER_COLUMNS)[number]>;
export type StoredLine = Pick<OrderLineRow, 'order_id' | 'item_id' | 'position' | 'quantity' | 'unit_price'>;

const selectOrderById = compiledVisibleById('orders', (db, id: number) =>
  db.selectFrom('orders').select(ORDER_COLUMNS).where('id', '=', id),
);
const selectLinesOfOrder = compiledQuery((db, orderId: number) =>
  db
    .selectFrom('order_lines')
    .select(['order_id', 'item_id', 'position', 'quantity', 'unit_price'])
    .where('order_id', '=', orderId)
    .orderBy('position'),
);

/** The order, when it exists and the sight shows it. */
export async function findOrderById(db: Executor, id: number, sight: Sight): Promise<StoredOrder | undefined> {
  const [order] = await selectOrderById(db, id, sight);
  return order;
}

export function findOrders(db: Executor, query: ListQuery, sight: Sight) {
  return fetchPage(whereVisible(db.selectFrom('orders').select(ORDER_COLUMNS), 'orders', sight), query);
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
