import { sql } from 'kysely';
import type { Executor } from '../../db/database.js';
import { MAX_COMPILED_ROWS, compiledPerCount, compiledQuery, rowsOf } from '../../db/compiled.js';
import { isSqlite } from '../../db/dialect.js';
import { eitherParameters, visibleInEither, type Sight } from '../../db/visibility.js';
import { MOVEMENT_FIELDS, type NewMovement } from '../items/stock.repository.js';
import type { NewLine, PlacementFacts, StockMove } from './order-lines.js';
import { ORDER_COLUMNS, type StoredLine, type StoredOrder } from './orders.repository.js';

/**
 * Every statement of an order's hold on stock, in one place: the one read a placement's checks
 * need, the writes of placing an order (the order, its lines, each line's reservation and the
 * ledger entry that records it), and those of changing one (its lines replaced; stock reserved,
 * released or fulfilled, each move with its ledger entry). The order's other queries are in
 * orders.repository.ts; the stock's own (its level, set by hand, and the ledger read) in
 * items/stock.repository.ts.
 *
 * Placing an order takes as few statements as the database allows: one read for everything the
 * checks need, and on PostgreSQL one statement for every write (the order, its lines, the
 * reservations and their ledger entries), and the stock after each reservation comes back for the
 * order's events, so an order costs five round trips (BEGIN, read, write, its events, COMMIT)
 * instead of one per row. SQLite runs in the process, where a statement costs
 * microseconds, and has no data-modifying WITH: there the writes stay one statement each.
 */

/** What a placement needs to know: the user it names (null: none) and its items, each through the caller's sight. */
export interface PlacementQuestion {
  userId: number | null;
  itemIds: number[];
  sights: { users: Sight; items: Sight };
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

/**
 * One read: whether the user exists, and each item's price and unreserved stock. A user or item
 * the caller may not see (its sights) is read as one that does not exist: an order cannot name
 * another owner's customer, nor learn that it exists.
 */
export async function findPlacementFacts(db: Executor, question: PlacementQuestion): Promise<PlacementFacts> {
  const { userId, itemIds, sights } = question;
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

/** A placed order before it is stored: its owner is the caller placing it (null: an external issuer's subject). */
export interface NewOrder {
  name: string;
  user_id: number;
  total: number;
  created_by: number | null;
  now: string;
}

/** The moves stock could no longer cover (another writer took it meanwhile); the caller must abandon the transaction. */
export interface Uncovered {
  uncovered: StockMove[];
}

/** The order written, with its lines and ledger entries, or what stock could not cover. */
export type Placement = { order: StoredOrder; lines: StoredLine[]; movements: NewMovement[] } | Uncovered;

/**
 * Writes a placed order, its lines, and for each line a reservation of its units with the ledger
 * entry that records it, in the caller's transaction. Each reservation is conditional (stock is
 * never oversold); when one finds too little stock, `uncovered` names its moves and the caller
 * must abandon the transaction, since on PostgreSQL the rest has been written. Stock rows are
 * locked in item order, so two concurrent placements never deadlock.
 */
export function insertPlacedOrder(trx: Executor, placement: { order: NewOrder; lines: NewLine[] }): Promise<Placement> {
  return isSqlite(trx) ? insertPlacedOrderInSteps(trx, placement) : insertPlacedOrderAtOnce(trx, placement);
}

async function insertPlacedOrderInSteps(
  trx: Executor,
  { order, lines }: { order: NewOrder; lines: NewLine[] },
): Promise<Placement> {
  const [stored] = await insertOrderRow(trx, order.name, order.user_id, order.total, order.created_by, order.now);
  if (stored === undefined) throw new Error('inserting an order returned no row');
  const storedLines = lines.map((line) => ({ order_id: stored.id, ...line }));
  await insertLines(trx, storedLines);
  const moved = await moveOrderStock(trx, { orderId: stored.id, moves: lines.map(reservationOf), now: order.now });
  if ('uncovered' in moved) return moved;
  return { order: stored, lines: storedLines, movements: moved.movements };
}

async function insertPlacedOrderAtOnce(
  trx: Executor,
  { order, lines }: { order: NewOrder; lines: NewLine[] },
): Promise<Placement> {
  const [row] = await placeOrderAtOnce(
    trx,
    lines.length,
    order.name,
    order.user_id,
    order.total,
    order.created_by,
    order.now,
    ...lines.flatMap((line) => [line.item_id, line.position, line.quantity, line.unit_price]),
  );
  if (row === undefined) throw new Error('placing an order answered no row');
  const byItem = new Map(lines.map((line) => [line.item_id, reservationOf(line)]));
  if (row.uncovered !== null) return { uncovered: row.uncovered.map((itemId) => byItem.get(Number(itemId))!) };
  const { uncovered: _, moved, ...stored } = row;
  const movements = (moved ?? []).map(([itemId, quantity, reserved]) =>
    movementOf(
      byItem.get(Number(itemId))!,
      { item_id: Number(itemId), quantity: Number(quantity), reserved: Number(reserved) },
      stored.id,
      order.now,
    ),
  );
  return { order: stored, lines: lines.map((line) => ({ order_id: stored.id, ...line })), movements };
}

/**
 * The placement on PostgreSQL in one data-modifying WITH, compiled once per number of lines (so
 * that number is written into the statement). Data-modifying WITH queries all run, whatever the
 * final SELECT reads; each sees the others' work only through RETURNING. The rows are locked as a
 * DELETE of an item takes them (the item, then its stock, through the cascade), in item order, so
 * neither can wait for the other in a circle: `items_held` holds the items as the lines' foreign
 * keys would, `locked` the stock rows that `moved` then updates; `placed` inserts the order only
 * when every line was reserved.
 */
const placeOrderAtOnce = compiledPerCount(
  MAX_COMPILED_ROWS,
  (db, count, name, userId, total, createdBy, now, ...lineValues) => {
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
      where (select count(*) from moved) = ${sql.lit(count)}
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

/** An order's lines replaced by `lines` (a change of its lines; the stock moves are moveOrderStock's). */
export async function replaceLines(trx: Executor, orderId: number, lines: NewLine[]): Promise<void> {
  await trx.deleteFrom('order_lines').where('order_id', '=', orderId).execute();
  await insertLines(
    trx,
    lines.map((line) => ({ order_id: orderId, ...line })),
  );
}

/** Moves of the stock of an order's items, and when they happen. */
export interface OrderStockChange {
  orderId: number;
  moves: StockMove[];
  now: string;
}

/**
 * Applies an order's stock moves and writes their ledger entries against the order, in the
 * caller's transaction. Each move is one conditional UPDATE that applies only while quantity and
 * reserved stay ≥ 0, so stock is never oversold, whatever runs concurrently (correct on SQLite and
 * PostgreSQL alike). The caller has checked availability first (to list every short line), so a
 * move that finds too little stock means a concurrent writer took it in between (possible on
 * PostgreSQL): it comes back `uncovered` and the caller abandons the transaction. Rows are locked
 * in item order, so two concurrent orders never deadlock (PostgreSQL).
 */
export async function moveOrderStock(
  trx: Executor,
  change: OrderStockChange,
): Promise<{ movements: NewMovement[] } | Uncovered> {
  const movements: NewMovement[] = [];
  for (const move of [...change.moves].sort((a, b) => a.itemId - b.itemId)) {
    const counters = COUNTER_CHANGES[move.kind](move.units);
    const [after] = await updateStockBy(
      trx,
      move.itemId,
      counters.quantity,
      counters.reserved,
      counters.fulfilled,
      change.now,
      -counters.quantity,
      -counters.reserved,
    );
    if (after === undefined) return { uncovered: [move] };
    movements.push(movementOf(move, after, change.orderId, change.now));
  }
  if (movements.length > 0)
    await insertMovementRows(
      trx,
      movements.length,
      ...movements.flatMap((movement) => MOVEMENT_FIELDS.map((field) => movement[field])),
    );
  return { movements };
}

/** How each kind of move changes the three counters of an item's stock. */
const COUNTER_CHANGES: Record<
  StockMove['kind'],
  (units: number) => { quantity: number; reserved: number; fulfilled: number }
> = {
  reserve: (units) => ({ quantity: -units, reserved: units, fulfilled: 0 }),
  release: (units) => ({ quantity: units, reserved: -units, fulfilled: 0 }),
  fulfil: (units) => ({ quantity: 0, reserved: -units, fulfilled: units }),
};

function reservationOf(line: NewLine): StockMove {
  return { itemId: line.item_id, kind: 'reserve', units: line.quantity };
}

/** The ledger entry of a move: the change it made and the stock after it. */
function movementOf(
  move: StockMove,
  after: { item_id: number; quantity: number; reserved: number },
  orderId: number,
  now: string,
): NewMovement {
  const counters = COUNTER_CHANGES[move.kind](move.units);
  return {
    item_id: after.item_id,
    kind: move.kind,
    quantity_change: counters.quantity,
    reserved_change: counters.reserved,
    quantity_after: after.quantity,
    reserved_after: after.reserved,
    order_id: orderId,
    created_at: now,
  };
}

// The statements of the steps, compiled once (per row count for the multi-row inserts): building a
// statement costs more than SQLite takes to run it, and every order line runs them.
const insertOrderRow = compiledQuery(
  (db, name: string, userId: number, total: number, createdBy: number | null, now: string) =>
    db
      .insertInto('orders')
      .values({
        name,
        user_id: userId,
        created_by: createdBy,
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

async function insertLines(trx: Executor, lines: StoredLine[]): Promise<void> {
  if (lines.length > 0)
    await insertLineRows(trx, lines.length, ...lines.flatMap((line) => LINE_FIELDS.map((field) => line[field])));
}

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
      .returning(['item_id', 'quantity', 'reserved']),
);

const insertMovementRows = compiledPerCount(MAX_COMPILED_ROWS, (db, _count, ...values) =>
  db.insertInto('stock_movements').values(rowsOf<NewMovement>(values, MOVEMENT_FIELDS)),
);

/**
 * Takes from the stock of each item the units the earlier chunks of an import's check pass
 * reserved (each chunk is rolled back after it is checked), so that the chunk checked now finds
 * the stock the import will have left when its rows are written: a file whose later orders would
 * oversell fails its check. Only inside a transaction that is rolled back: no ledger entry is
 * written. Never below zero (a concurrent writer may have taken stock meanwhile).
 */
export async function holdStockOfCheckedOrders(trx: Executor, held: ReadonlyMap<number, number>): Promise<void> {
  for (const [itemId, units] of held)
    await trx
      .updateTable('stock')
      .set({ quantity: sql<number>`case when quantity >= ${units} then quantity - ${units} else 0 end` })
      .where('item_id', '=', itemId)
      .execute();
}
