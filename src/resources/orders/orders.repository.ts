import type { Executor, OrderLineRow, OrderRow, OrderStatus } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/paginate.js';

export const ORDER_COLUMNS = ['id', 'name', 'user_id', 'status', 'total', 'created_at', 'updated_at', 'version'] as const;
export type StoredOrder = Pick<OrderRow, (typeof ORDER_COLUMNS)[number]>;
export type StoredLine = Pick<OrderLineRow, 'order_id' | 'item_id' | 'position' | 'quantity' | 'unit_price'>;

const selectOrderById = compiledQuery((db, id: number) => db.selectFrom('orders').select(ORDER_COLUMNS).where('id', '=', id));
const selectLinesOfOrder = compiledQuery((db, orderId: number) =>
  db.selectFrom('order_lines').select(['order_id', 'item_id', 'position', 'quantity', 'unit_price']).where('order_id', '=', orderId).orderBy('position'),
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

export function insertOrder(db: Executor, order: { name: string; user_id: number; total: number; now: string }): Promise<StoredOrder> {
  return db
    .insertInto('orders')
    .values({ name: order.name, user_id: order.user_id, status: 'placed', total: order.total, version: 1, created_at: order.now, updated_at: order.now })
    .returning(ORDER_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function insertLines(db: Executor, lines: StoredLine[]): Promise<void> {
  if (lines.length > 0) await db.insertInto('order_lines').values(lines).execute();
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
    .set({ name: changes.name, user_id: changes.user_id, status: changes.status, total: changes.total, version: version + 1, updated_at: changes.now })
    .where('id', '=', id)
    .where('version', '=', version)
    .returning(ORDER_COLUMNS)
    .executeTakeFirst();
}

export async function hasPlacedOrders(db: Executor, userId: number): Promise<boolean> {
  const order = await db.selectFrom('orders').select('id').where('user_id', '=', userId).where('status', '=', 'placed').limit(1).executeTakeFirst();
  return order !== undefined;
}
