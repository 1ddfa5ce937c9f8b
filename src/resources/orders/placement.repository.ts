import { sql } from 'kysely';
import type { Executor } from '../../db/database.js';
import { MAX_COMPILED_ROWS, compiledPerCount } from '../../db/compiled.js';
import { isSqlite } from '../../db/dialect.js';
import { insertMovements, moveStock, type NewMovement } from '../items/stock.repository.js';
import { eitherParameters, visibleInEither, type Sight } from '../../db/visibility.js';
import {
  insertLines,
  insertOrder,
  ORDER_COLUMNS,
  type NewOrder,
  type StoredLine,
  type StoredOrder,
} from './orders.repository.js';

/**
 * Placing an order in as few statements as the database allows: one read for everything the
 * checks need, and on PostgreSQL one statement for every write (the order, its lines, the
 * reservations and their ledger entries), and the stock after each reservation comes back for the
 * order's events, so an order costs five round trips (BEGIN, read, write, its events, COMMIT)
 * instead of one per row. SQLite runs in the process, where a statement costs
 * microseconds, and has no data-modifying WITH: there the writes stay one statement each.
 */

/**
 * What the checks of a placement need, read at once: whether the user exists, and each item's
 * price and unreserved stock. A user or item the caller may not see (its sights) is read as one
 * that does not exist: an order cannot name another owner's customer, nor learn that it exists.
 */
export interface PlacementFacts {
  userFound: boolean;
  /** By item id; an item that does not exist is absent; `available` undefined when the item has no stock row. */
  items: Map<number, { price: number; available: number | undefined }>;
}

// Compiled once per number of items. One row at least (the left join from a single row), so the
// user's answer comes back even when no item exists.
const selectPlacementFacts = compiledPerCount(
  MAX_COMPILED_ROWS,
  (db, count, userId, userOwner, userUser, itemOwner, ...itemIds) => {
    const query = sql<{ user_found: unknown; id: number | null; price: number | null; quantity: number | null }>`
    select exists(select 1 from users u where u.id = ${userId} and ${visibleInEither('users', 'u', userOwner, userUser)}) as user_found, i.id, i.price, s.quantity
    from (select 1 as one) as anchor
    left join items i on i.id in (${count > 0 ? sql.join(itemIds) : sql`null`}) and ${visibleInEither('items', 'i', itemOwner)}
    left join stock s on s.item_id = i.id`;
    return { compile: () => query.compile(db) };
  },
);

/** One read: the user (when `userId` is not null) and the items named, with their stock. */
export async function findPlacementFacts(
  db: Executor,
  userId: number | null,
  itemIds: number[],
  sights: { users: Sight; items: Sight },
): Promise<PlacementFacts> {
  const rows = await selectPlacementFacts(
    db,
    itemIds.length,
    userId,
    ...eitherParameters('users', sights.users),
    // Items belong to no user: only their owner limits them.
    eitherParameters('items', sights.items)[0],
    ...itemIds,
  );
  const items = new Map<number, { price: number; available: number | undefined }>();
  for (const row of rows) {
    if (row.id !== null) items.set(row.id, { price: row.price!, available: row.quantity ?? undefined });
  }
  // PostgreSQL answers a boolean, SQLite 0 or 1.
  return { userFound: rows[0] !== undefined && (rows[0].user_found === true || rows[0].user_found === 1), items };
}

/** A line to store, before its order has an id. */
export type NewLine = Omit<StoredLine, 'order_id'>;

/** The order written, or the items whose stock could no longer cover their line (another writer took it meanwhile). */
export type Placement = { order: StoredOrder; lines: StoredLine[]; movements: NewMovement[] } | { uncovered: number[] };

/**
 * Writes a placed order, its lines, and for each line a reservation of its units with the ledger
 * entry that records it, in the caller's transaction. Each reservation is conditional (stock is
 * never oversold); when one finds too little stock, `uncovered` names the items and the caller
 * must abandon the transaction, since on PostgreSQL the rest has been written. Stock rows are
 * locked in item order, so two concurrent placements never deadlock.
 */
export function insertPlacedOrder(trx: Executor, order: NewOrder, lines: NewLine[]): Promise<Placement> {
  return isSqlite(trx) ? insertPlacedOrderInSteps(trx, order, lines) : insertPlacedOrderAtOnce(trx, order, lines);
}

async function insertPlacedOrderInSteps(trx: Executor, order: NewOrder, lines: NewLine[]): Promise<Placement> {
  const stored = await insertOrder(trx, order);
  const storedLines = lines.map((line) => ({ order_id: stored.id, ...line }));
  await insertLines(trx, storedLines);
  const movements: NewMovement[] = [];
  for (const line of [...lines].sort((a, b) => a.item_id - b.item_id)) {
    const moved = await moveStock(trx, line.item_id, {
      quantity: -line.quantity,
      reserved: line.quantity,
      fulfilled: 0,
      now: order.now,
    });
    if (!moved) return { uncovered: [line.item_id] };
    movements.push(reservation(line, moved, stored.id, order.now));
  }
  await insertMovements(trx, movements);
  return { order: stored, lines: storedLines, movements };
}

async function insertPlacedOrderAtOnce(trx: Executor, order: NewOrder, lines: NewLine[]): Promise<Placement> {
  const rows = await placeOrderAtOnce(
    trx,
    lines.length,
    order.name,
    order.user_id,
    order.total,
    order.created_by,
    order.now,
    lines.length,
    ...lines.flatMap((line) => [line.item_id, line.position, line.quantity, line.unit_price]),
  );
  const [row] = rows;
  if (row === undefined) throw new Error('placing an order answered no row');
  if (row.uncovered !== null) return { uncovered: row.uncovered.map(Number) };
  const { uncovered: _, moved, ...stored } = row;
  const byItem = new Map(lines.map((line) => [line.item_id, line]));
  const movements = (moved ?? []).map(([itemId, quantity, reserved]) =>
    reservation(
      byItem.get(Number(itemId))!,
      { item_id: Number(itemId), quantity: Number(quantity), reserved: Number(reserved) },
      stored.id,
      order.now,
    ),
  );
  return { order: stored, lines: lines.map((line) => ({ order_id: stored.id, ...line })), movements };
}

/**
 * The placement on PostgreSQL in one data-modifying WITH, compiled once per number of lines.
 * Data-modifying WITH queries all run, whatever the final SELECT reads; each sees the others' work
 * only through RETURNING. The rows are locked as a DELETE of an item takes them (the item, then
 * its stock, through the cascade), in item order, so neither can wait for the other in a circle:
 * `items_held` holds the items as the lines' foreign keys would, `locked` the stock rows that
 * `moved` then updates; `placed` inserts the order only when every line was reserved.
 */
const placeOrderAtOnce = compiledPerCount(
  MAX_COMPILED_ROWS,
  (db, count, name, userId, total, createdBy, now, lineCount, ...lineValues) => {
    const wanted = sql.join(
      Array.from({ length: count }, (_, index) => {
        const [itemId, position, quantity, unitPrice] = lineValues.slice(index * 4, index * 4 + 4);
        return sql`(${itemId}::bigint, ${position}::integer, ${quantity}::bigint, ${unitPrice}::bigint)`;
      }),
    );
    const columns = sql.join(ORDER_COLUMNS.map((column) => sql.ref(`placed.${column}`)));
    const query = sql<StoredOrder & { uncovered: number[] | null; moved: [number, number, number][] | null }>`
    with wanted (item_id, position, quantity, unit_price) as (values ${wanted}),
    items_held as materialized (select id from items where id in (select item_id from wanted) order by id for key share),
    locked as materialized (select stock.item_id from stock join items_held on items_held.id = stock.item_id order by stock.item_id for update of stock),
    moved as (
      update stock set quantity = stock.quantity - wanted.quantity, reserved = stock.reserved + wanted.quantity,
        version = stock.version + 1, updated_at = ${now}
      from wanted join locked on locked.item_id = wanted.item_id
      where stock.item_id = wanted.item_id and stock.quantity >= wanted.quantity
      returning stock.item_id, stock.quantity, stock.reserved
    ),
    placed as (
      insert into orders (name, user_id, status, total, created_by, version, created_at, updated_at)
      select ${name}, ${userId}::bigint, 'placed', ${total}::bigint, ${createdBy}::bigint, 1, ${now}, ${now}
      where (select count(*) from moved) = ${lineCount}
      returning ${sql.join(ORDER_COLUMNS.map((column) => sql.ref(column)))}
    ),
    line_rows as (
      insert into order_lines (order_id, item_id, position, quantity, unit_price)
      select placed.id, wanted.item_id, wanted.position, wanted.quantity, wanted.unit_price from placed cross join wanted
    ),
    ledger as (
      insert into stock_movements (item_id, kind, quantity_change, reserved_change, quantity_after, reserved_after, order_id, created_at)
      select moved.item_id, 'reserve', -wanted.quantity, wanted.quantity, moved.quantity, moved.reserved, placed.id, ${now}
      from placed cross join moved join wanted on wanted.item_id = moved.item_id
    )
    select ${columns}, null::bigint[] as uncovered,
      (select json_agg(json_build_array(item_id, quantity, reserved) order by item_id) from moved) as moved
    from placed
    union all
    select ${sql.join(ORDER_COLUMNS.map(() => sql`null`))}, array(select item_id from wanted where item_id not in (select item_id from moved) order by item_id), null
    where not exists (select 1 from placed)`;
    return { compile: () => query.compile(db) };
  },
);

function reservation(
  line: NewLine,
  after: { item_id: number; quantity: number; reserved: number },
  orderId: number,
  now: string,
): NewMovement {
  return {
    item_id: after.item_id,
    kind: 'reserve',
    quantity_change: -line.quantity,
    reserved_change: line.quantity,
    quantity_after: after.quantity,
    reserved_after: after.reserved,
    order_id: orderId,
    created_at: now,
  };
}
