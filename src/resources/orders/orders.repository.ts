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

/** A line as a list of orders shows it: what it is of, and what it costs (its position only orders it). */
export type ListedLine = Pick<OrderLineRow, 'order_id' | 'item_id' | 'quantity' | 'unit_price'>;

const LISTED_LINE_COLUMNS = ['order_id', 'item_id', 'quantity', 'unit_price'] as const;

const selectLinesOfIdRange = compiledQuery((db, first: number, last: number) =>
  db
    .selectFrom('order_lines')
    .select(LISTED_LINE_COLUMNS)
    .where('order_id', '>=', first)
    .where('order_id', '<=', last)
    .orderBy('order_id')
    .orderBy('position'),
);

/**
 * The lines of several orders (a page, or a chunk of an export), by order id and line position.
 * When the ids lie close together (an export's chunk in id order: nearly every id between the
 * first and the last), one range scan of the lines' key reads them, cheaper than a look-up per id;
 * a line of an order between them that is not asked for (filtered out, or not visible) is dropped
 * here. Otherwise, a look-up per id.
 */
export async function findLinesOfOrders(db: Executor, orderIds: number[]): Promise<ListedLine[]> {
  if (orderIds.length === 0) return [];
  let first = orderIds[0]!;
  let last = first;
  for (const id of orderIds) {
    if (id < first) first = id;
    else if (id > last) last = id;
  }
  if (last - first < 2 * orderIds.length) {
    const lines = await selectLinesOfIdRange(db, first, last);
    if (last - first + 1 === orderIds.length) return lines;
    const asked = new Set(orderIds);
    return lines.filter((line) => asked.has(line.order_id));
  }
  return db
    .selectFrom('order_lines')
    .select(LISTED_LINE_COLUMNS)
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
