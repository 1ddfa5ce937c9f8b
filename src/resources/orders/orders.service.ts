import { nowTimestamp } from '../../db/clock.js';
import { deleteAtVersion } from '../../db/versioned.js';
import type { Executor, OrderStatus, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { creatorOf, sightOf } from '../../auth/visibility.js';
import { ConflictError, NotFoundError, UnprocessableError } from '../../errors.js';
import { ownerOf, recordEvent, recordEvents } from '../../outbox/outbox.js';
import { stockByItem, stockEvents } from '../items/stock.service.js';
import { formatMinorUnits } from '../items/money.js';
import type { VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertReadOnlyEchoes,
  withRowLocked,
  DELETED,
  VERSION_MOVED,
  written,
  type LockedWrite,
} from '../../engine/preconditions.js';
import { createdByDiffers } from '../../engine/ownership.js';
import { assertMayRefer, mayRead, type Reader, type Reference } from '../../engine/reading/references.js';
import {
  findLines,
  findLinesOfOrders,
  findOrderValues,
  findOrderById,
  updateOrderAtVersion,
  type ListedLineValues,
  type StoredLine,
  type StoredOrder,
} from './orders.repository.js';
import {
  findPlacementFacts,
  insertPlacedOrder,
  moveOrderStock,
  replaceLines,
  type OrderStockChange,
  type PlacementQuestion,
} from './placement.repository.js';
import {
  assertStockCovers,
  insufficientStock,
  itemDeletedMeanwhile,
  lineDifference,
  linesToStore,
  mergeLines,
  priceLines,
  sameLines,
  totalOf,
  type ShortLine,
  type StockMove,
  type WantedLine,
} from './order-lines.js';
import type { Order, OrderCreate, OrderPatch, OrderReplace } from './orders.schema.js';

/**
 * Orders reserve stock. Every change that moves stock runs in one transaction that also writes
 * the order and the ledger, so an order and its reservations exist together or not at all.
 * Availability is checked for all lines first, so a 409 can list every short line; the moves
 * themselves are conditional updates, so stock is never oversold even if another writer gets
 * in between (PostgreSQL), in which case the transaction is abandoned with the same 409.
 */
/** An order as the API shows it, and the version its ETag comes from. */
export type OrderView = Order & { version: number };

/** The order; 404 as well when the sight does not show it (its existence is not told). */
export async function getOrder(db: Executor, id: number, sight: Sight): Promise<OrderView> {
  const order = await findOrderById(db, id, sight);
  if (!order) throw orderNotFound(id);
  return presentOrder(order, await findLines(db, id));
}

/**
 * A page of orders with their lines. Orders and lines are read as arrays of values (an export
 * reads millions: db/array-rows.ts) and presented here, each record built once, as answered.
 */
export async function listOrders(db: Executor, query: ListQuery, sight: Sight) {
  const page = await findOrderValues(db, query, sight);
  const { rows } = page;
  const ids = new Array<number>(rows.length);
  for (let index = 0; index < rows.length; index++) ids[index] = rows[index]![0];
  const lines = await findLinesOfOrders(db, ids);
  const orders = new Array<OrderView>(rows.length);
  // The lines come in order id order: when the orders do too (an export's chunks, a page sorted by
  // id), each order's lines are the next ones; otherwise they are looked up by order.
  const byOrder = ascending(ids) ? undefined : linesByOrder(lines);
  let next = 0;
  for (let index = 0; index < rows.length; index++) {
    const order = rows[index]!;
    let own: OrderView['lines'];
    if (byOrder) own = byOrder.get(order[0]) ?? [];
    else {
      own = [];
      while (next < lines.length && lines[next]![0] < order[0]) next++;
      for (; next < lines.length && lines[next]![0] === order[0]; next++) own.push(listedLine(lines[next]!));
    }
    orders[index] = {
      id: order[0],
      name: order[1],
      user_id: order[2],
      status: order[3],
      total: formatMinorUnits(order[4]),
      created_by: order[5],
      created_at: order[6],
      updated_at: order[7],
      version: order[8],
      lines: own,
    };
  }
  return { nextAfter: page.nextAfter, rows: orders };
}

const listedLine = ([, itemId, quantity, unitPrice]: ListedLineValues): OrderView['lines'][number] => ({
  item_id: itemId,
  quantity,
  unit_price: formatMinorUnits(unitPrice),
  line_total: formatMinorUnits(unitPrice * quantity),
});

function ascending(ids: number[]): boolean {
  for (let index = 1; index < ids.length; index++) if (ids[index - 1]! >= ids[index]!) return false;
  return true;
}

function linesByOrder(lines: ListedLineValues[]): Map<number, OrderView['lines']> {
  const byOrder = new Map<number, OrderView['lines']>();
  for (const line of lines) {
    const group = byOrder.get(line[0]);
    if (group) group.push(listedLine(line));
    else byOrder.set(line[0], [listedLine(line)]);
  }
  return byOrder;
}

/**
 * `reader`: the caller, who must be able to read the user and items it names (and see them: one it
 * may not see is one that does not exist), sees stock counts only if it may read stock, and owns
 * the order.
 */
export async function placeOrder(trx: Trx, input: OrderCreate, reader: Reader): Promise<OrderView> {
  assertMayRefer(reader, [
    { resource: 'users', pointer: '#/user_id' },
    { resource: 'items', pointer: '#/lines' },
  ]);
  const now = nowTimestamp();
  const facts = await findPlacementFacts(trx, {
    userId: input.user_id,
    itemIds: [...new Set(input.lines.map((line) => line.item_id))],
    sights: referenceSights(reader),
  });
  if (!facts.userFound) throw unknownUser(input.user_id);
  const wanted = mergeLines(input.lines);
  const prices = priceLines(facts, wanted, new Map());
  const total = totalOf(wanted, prices);
  assertStockCovers(facts, wanted, new Map(), mayRead(reader, 'stock'));
  const placed = await insertPlacedOrder(trx, {
    order: { name: input.name, user_id: input.user_id, total, created_by: creatorOf(reader, 'orders'), now },
    lines: linesToStore(wanted, prices),
  });
  // Another writer took the stock between the read and the write (PostgreSQL): the transaction is abandoned with the same 409.
  if ('uncovered' in placed) throw await stockTakenMeanwhile(trx, placed.uncovered, mayRead(reader, 'stock'));
  const order = presentOrder(placed.order, placed.lines);
  await recordEvents(trx, [
    { type: 'order.created', path: orderPath(order.id), data: order },
    ...stockEvents(placed.movements),
  ]);
  return order;
}

export function replaceOrder(
  trx: Trx,
  id: number,
  input: OrderReplace,
  condition: VersionCondition,
  sight: Sight,
  reader: Reader,
): Promise<OrderView> {
  return changeOrder(trx, id, condition, sight, input, 'replace', reader);
}

export function patchOrder(
  trx: Trx,
  id: number,
  patch: OrderPatch,
  condition: VersionCondition,
  sight: Sight,
  reader: Reader,
): Promise<OrderView> {
  return changeOrder(trx, id, condition, sight, patch, 'patch', reader);
}

/** Deletes the order; stock it still reserves (a placed order) is released. */
export async function deleteOrder(trx: Trx, id: number, condition: VersionCondition, sight: Sight): Promise<void> {
  await withOrderLocked(trx, id, condition, sight, async (order, lines) => {
    if (!(await deleteAtVersion(trx, 'orders', id, order.version))) return VERSION_MOVED;
    await recordEvents(trx, [
      { type: 'order.deleted', path: orderPath(id), data: { id }, owner: ownerOf('orders', order) },
    ]);
    if (order.status === 'placed')
      await applyStockMoves(trx, {
        orderId: id,
        moves: lines.map((line) => ({ itemId: line.item_id, kind: 'release', units: line.quantity })),
        now: nowTimestamp(),
      });
    return DELETED;
  });
}

/** Which statuses an order in a status may move to. */
const TRANSITIONS: Record<OrderStatus, OrderStatus[]> = {
  placed: ['fulfilled', 'cancelled'],
  fulfilled: [],
  cancelled: [],
};

async function changeOrder(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  sight: Sight,
  body: OrderReplace | OrderPatch,
  mode: 'replace' | 'patch',
  reader: Reader,
): Promise<OrderView> {
  return withOrderLocked(trx, id, condition, sight, async (stored, storedLines) => {
    assertOrderEchoes(stored, body, mode);

    const wantedLines = body.lines ? mergeLines(body.lines) : undefined;
    const linesChange = wantedLines !== undefined && !sameLines(wantedLines, storedLines);
    const userId = body.user_id ?? stored.user_id;
    const userChanges = userId !== stored.user_id;
    assertMayRefer(reader, newReferences(storedLines, wantedLines, userChanges));
    if (stored.status !== 'placed' && (mode === 'replace' || linesChange || userChanges)) {
      throw new ConflictError(
        'order-not-placed',
        `Order ${id} is ${stored.status}; only a placed order's lines and user can change.`,
        { current_status: stored.status },
      );
    }
    const status =
      mode === 'patch' && body.status !== undefined ? assertTransition(stored, body.status) : stored.status;
    const name = body.name ?? stored.name;
    if (!linesChange && !userChanges && status === stored.status && name === stored.name)
      return written(presentOrder(stored, storedLines));

    const facts =
      userChanges || linesChange
        ? await findPlacementFacts(trx, {
            userId: userChanges ? userId : null,
            itemIds: linesChange ? [...wantedLines.keys()] : [],
            sights: referenceSights(reader),
          })
        : undefined;
    if (userChanges && userId !== null && !facts!.userFound) throw unknownUser(userId);
    const now = nowTimestamp();
    let lines = storedLines;
    let total = stored.total;
    const moves: StockMove[] = [];
    if (linesChange) {
      const current = new Map(storedLines.map((line) => [line.item_id, line]));
      const prices = priceLines(facts!, wantedLines, current);
      total = totalOf(wantedLines, prices);
      assertStockCovers(facts!, wantedLines, current, mayRead(reader, 'stock'));
      lines = linesToStore(wantedLines, prices).map((line) => ({ order_id: id, ...line }));
      moves.push(...lineDifference(current, wantedLines));
    }
    if (status !== stored.status) {
      const kind = status === 'fulfilled' ? 'fulfil' : 'release';
      moves.push(...lines.map((line): StockMove => ({ itemId: line.item_id, kind, units: line.quantity })));
    }

    // The version is claimed first: if another writer got in, nothing below has happened yet.
    const updated = await updateOrderAtVersion(trx, id, stored.version, {
      name,
      user_id: userId,
      status,
      total,
      now,
    });
    if (!updated) return VERSION_MOVED;
    if (linesChange) await replaceLines(trx, id, lines);
    const order = presentOrder(updated, lines);
    if (status !== stored.status)
      await recordEvent(trx, 'order.status_changed', orderPath(id), { ...order, previous_status: stored.status });
    else await recordEvent(trx, mode === 'replace' ? 'order.replaced' : 'order.updated', orderPath(id), order);
    await applyStockMoves(trx, { orderId: id, moves, now }, mayRead(reader, 'stock'));
    return written(order);
  });
}

/**
 * Runs `write` on the order and its lines under the order's row lock, once the order is found among
 * those the request sees (404 otherwise) and If-Match holds (412); 412 too when `write` finds the
 * version moved.
 */
function withOrderLocked<T>(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  sight: Sight,
  write: (order: StoredOrder, lines: StoredLine[]) => Promise<LockedWrite<T>>,
): Promise<T> {
  return withRowLocked(
    trx,
    { table: 'orders', id },
    async () => {
      const order = await findOrderById(trx, id, sight);
      if (!order) throw orderNotFound(id);
      assertCondition(condition, order.version, `Order ${id}`);
      return write(order, await findLines(trx, id));
    },
    `Order ${id}`,
  );
}

function assertTransition(order: StoredOrder, status: string): OrderStatus {
  if (status === order.status) return order.status;
  const allowed = TRANSITIONS[order.status];
  if (!(allowed as string[]).includes(status)) {
    const reason = Object.hasOwn(TRANSITIONS, status)
      ? `cannot move from ${order.status} to ${status}`
      : `"${status}" is not an order status`;
    throw new ConflictError(
      'invalid-transition',
      `Order ${order.id} ${reason}; from ${order.status} it can move to ${allowed.length > 0 ? allowed.join(' or ') : 'no other status'}.`,
      {
        current_status: order.status,
        allowed_statuses: allowed,
      },
    );
  }
  return status as OrderStatus;
}

/**
 * What a change refers to that the order did not: another user, items not on it yet. The user and
 * items already on the order are the order's, which the caller may read.
 */
function newReferences(
  storedLines: StoredLine[],
  wantedLines: Map<number, WantedLine> | undefined,
  userChanges: boolean,
): Reference[] {
  const newItems =
    wantedLines !== undefined &&
    [...wantedLines.keys()].some((itemId) => !storedLines.some((line) => line.item_id === itemId));
  return [
    ...(userChanges ? [{ resource: 'users' as const, pointer: '#/user_id' }] : []),
    ...(newItems ? [{ resource: 'items' as const, pointer: '#/lines' }] : []),
  ];
}

/** Which users and items an order may name: those the caller sees. */
function referenceSights(reader: Reader): PlacementQuestion['sights'] {
  return { users: sightOf(reader, 'users'), items: sightOf(reader, 'items') };
}

function unknownUser(userId: number): UnprocessableError {
  return new UnprocessableError(
    `There is no user ${userId}.`,
    [{ in: 'body', pointer: '#/user_id', detail: `there is no user ${userId}` }],
    'unknown-reference',
  );
}

/**
 * Applies an order's stock moves with their ledger entries and events, in the caller's transaction;
 * 409 when another writer took the stock after the check (with the stock available only when
 * `showsAvailable`: the caller may read stock), and the whole transaction is abandoned.
 */
async function applyStockMoves(trx: Trx, change: OrderStockChange, showsAvailable = false): Promise<void> {
  const moved = await moveOrderStock(trx, change);
  if ('uncovered' in moved) throw await stockTakenMeanwhile(trx, moved.uncovered, showsAvailable);
  await recordEvents(trx, stockEvents(moved.movements));
}

/** The 409 for moves whose stock another writer took after the check: what is available to each now. */
async function stockTakenMeanwhile(db: Executor, moves: StockMove[], showsAvailable: boolean): Promise<ConflictError> {
  const stocks = await stockByItem(
    db,
    moves.map((move) => move.itemId),
  );
  const short: ShortLine[] = [];
  for (const move of moves) {
    const stock = stocks.get(move.itemId);
    // No stock row: the item was deleted by a transaction that committed after this one read it (PostgreSQL).
    if (stock === undefined) return itemDeletedMeanwhile(move.itemId);
    short.push({ item_id: move.itemId, requested: move.units, available: stock.quantity });
  }
  return insufficientStock(short, showsAvailable);
}

/** Read-only fields echoed in a PUT/PATCH must equal the stored values; on PUT, status too. */
function assertOrderEchoes(stored: StoredOrder, body: OrderReplace | OrderPatch, mode: 'replace' | 'patch'): void {
  assertReadOnlyEchoes(stored, body, [
    ...createdByDiffers(stored, body),
    ...(body.total !== undefined && body.total !== formatMinorUnits(stored.total) ? ['total'] : []),
    // A status changes with PATCH (a transition), never with PUT.
    ...(mode === 'replace' && body.status !== undefined && body.status !== stored.status ? ['status'] : []),
  ]);
}

function presentOrder(
  order: StoredOrder,
  lines: readonly Pick<StoredLine, 'item_id' | 'quantity' | 'unit_price'>[],
): OrderView {
  return {
    ...order,
    total: formatMinorUnits(order.total),
    lines: lines.map((line) => ({
      item_id: line.item_id,
      quantity: line.quantity,
      unit_price: formatMinorUnits(line.unit_price),
      line_total: formatMinorUnits(line.unit_price * line.quantity),
    })),
  };
}

const orderPath = (id: number) => `/v1/orders/${id}`;

function orderNotFound(id: number): NotFoundError {
  return new NotFoundError(`There is no order ${id}.`);
}
