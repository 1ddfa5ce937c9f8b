import type { Executor, OrderLineRow, OrderRow, OrderStatus } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { withArrayRows } from '../../db/array-rows.js';
import { fetchArrayPage, type ListQuery } from '../../db/keyset.js';
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

/** An order as the values of ORDER_COLUMNS, in that order: how a list reads them (db/array-rows.ts). */
export type OrderValues = [
  id: number,
  name: string,
  user_id: number | null,
  status: OrderStatus,
  total: number,
  created_by: number | null,
  created_at: string,
  updated_at: string,
  version: number,
];

/** A page of orders, each as its values (a list's, and each chunk of an export's, where objects cost). */
export async function findOrderValues(
  db: Executor,
  query: ListQuery,
  sight: Sight,
): Promise<{ rows: OrderValues[]; nextAfter: (string | number)[] | undefined }> {
  const orders = whereVisible(db.selectFrom('orders').select(ORDER_COLUMNS), 'orders', sight);
  return (await fetchArrayPage(orders, query, ORDER_COLUMNS)) as { rows: OrderValues[]; nextAfter: undefined };
}

export function findLines(db: Executor, orderId: number): Promise<StoredLine[]> {
  return selectLinesOfOrder(db, orderId);
}

/**
 * A line as a list of orders shows it, as its values (db/array-rows.ts): what it is of, and what it
 * costs (its position only orders it).
 */
export type ListedLineValues = [
  order_id: number,
  item_id: number,
  quantity: number,
  unit_price: number,
  position: number,
];

const LISTED_LINE_COLUMNS = ['order_id', 'item_id', 'quantity', 'unit_price', 'position'] as const;

const selectLinesOfIdRange = compiledQuery((db, first: number, last: number) =>
  withArrayRows(
    db
      .selectFrom('order_lines')
      .select(LISTED_LINE_COLUMNS)
      .where('order_id', '>=', first)
      .where('order_id', '<=', last)
      .orderBy('order_id'),
  ),
);

/**
 * The lines of several orders (a page, or a chunk of an export), by order id and line position.
 * When the ids lie close together (an export's chunk in id order: nearly every id between the
 * first and the last), one range scan of the lines' key reads them, cheaper than a look-up per id;
 * a line of an order between them that is not asked for (filtered out, or not visible) is dropped
 * here. Otherwise, a look-up per id.
 *
 * The lines come in the order of the key (order_id, item_id), and each order's few lines are put
 * in their positions here: `order by order_id, position` made SQLite sort every chunk's lines in a
 * temporary B-tree, a third of the lines query's time in an export (docs/performance.md).
 */
export async function findLinesOfOrders(db: Executor, orderIds: number[]): Promise<ListedLineValues[]> {
  if (orderIds.length === 0) return [];
  let first = orderIds[0]!;
  let last = first;
  for (const id of orderIds) {
    if (id < first) first = id;
    else if (id > last) last = id;
  }
  if (last - first < 2 * orderIds.length) {
    const lines = inPositions((await selectLinesOfIdRange(db, first, last)) as unknown as ListedLineValues[]);
    if (last - first + 1 === orderIds.length) return lines;
    const asked = new Set(orderIds);
    return lines.filter((line) => asked.has(line[0]));
  }
  const lines = await withArrayRows(
    db.selectFrom('order_lines').select(LISTED_LINE_COLUMNS).where('order_id', 'in', orderIds).orderBy('order_id'),
  ).execute();
  return inPositions(lines as unknown as ListedLineValues[]);
}

/** Lines in order id order, each order's put in the order of their positions (in place). */
function inPositions(lines: ListedLineValues[]): ListedLineValues[] {
  let start = 0;
  for (let index = 1; index <= lines.length; index++) {
    const line = lines[index];
    if (line !== undefined && line[0] === lines[start]![0]) continue;
    let sorted = true;
    for (let at = start + 1; at < index && sorted; at++) sorted = lines[at - 1]![4] < lines[at]![4];
    if (!sorted) {
      const run = lines.slice(start, index).sort((a, b) => a[4] - b[4]);
      for (let at = 0; at < run.length; at++) lines[start + at] = run[at]!;
    }
    start = index;
  }
  return lines;
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
