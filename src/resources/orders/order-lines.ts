import type { MovementKind } from '../../db/database.js';
import { ConflictError, UnprocessableError, type FieldError } from '../../errors.js';
import type { StoredLine } from './orders.repository.js';
import { MAX_LINE_QUANTITY } from './orders.schema.js';

/**
 * The lines of an order as the request asks for them, and what follows from them before anything
 * is written: lines of one item merged, each priced, checked against the stock they need, the
 * stock moves that turn the current reservations into the wanted ones, and the total. Pure
 * functions of what the placement read (orders.service.ts writes, through placement.repository.ts).
 */

/**
 * What the checks of a placement need, read at once (findPlacementFacts): whether the user
 * exists, and each item's price and unreserved stock.
 */
export interface PlacementFacts {
  userFound: boolean;
  /** By item id; an item that does not exist is absent; `available` undefined when the item has no stock row. */
  items: Map<number, { price: number; available: number | undefined }>;
}

/** A line to store, before its order has an id. */
export type NewLine = Omit<StoredLine, 'order_id'>;

/** One change an order makes to the stock of one item. */
export interface StockMove {
  itemId: number;
  kind: Exclude<MovementKind, 'set'>;
  units: number;
}

/** A line that stock cannot cover: what was asked for and what is available to it. */
export interface ShortLine {
  item_id: number;
  requested: number;
  available: number;
}

export interface WantedLine {
  item_id: number;
  quantity: number;
  position: number;
  /** Where the item's lines are in the request body, for error pointers. */
  indexes: number[];
}

/**
 * Lines of the same item are merged into one, at the position of the first; the merged line is
 * held to the bound of any line (422 pointing at each line of the item when it exceeds it).
 */
export function mergeLines(lines: { item_id: number; quantity: number }[]): Map<number, WantedLine> {
  const merged = new Map<number, WantedLine>();
  lines.forEach((line, index) => {
    const existing = merged.get(line.item_id);
    if (existing) {
      existing.quantity += line.quantity;
      existing.indexes.push(index);
    } else {
      merged.set(line.item_id, {
        item_id: line.item_id,
        quantity: line.quantity,
        position: merged.size,
        indexes: [index],
      });
    }
  });
  const errors: FieldError[] = [...merged.values()]
    .filter((line) => line.quantity > MAX_LINE_QUANTITY)
    .flatMap((line) =>
      line.indexes.map((index) => ({
        in: 'body' as const,
        pointer: `#/lines/${index}/quantity`,
        detail: `the lines of item ${line.item_id} add up to ${line.quantity} units, more than the ${MAX_LINE_QUANTITY} of one line`,
      })),
    );
  if (errors.length > 0)
    throw new UnprocessableError(`The lines of one item add up to more than ${MAX_LINE_QUANTITY} units.`, errors);
  return merged;
}

export function sameLines(wanted: Map<number, WantedLine>, stored: StoredLine[]): boolean {
  return (
    wanted.size === stored.length &&
    stored.every(
      (line) =>
        wanted.get(line.item_id)?.quantity === line.quantity && wanted.get(line.item_id)?.position === line.position,
    )
  );
}

/**
 * The unit price of each wanted line: the price captured when the item was first put on the
 * order, else the item's current price. An unknown item is a 422 pointing at each of its lines.
 */
export function priceLines(
  facts: PlacementFacts,
  wanted: Map<number, WantedLine>,
  current: Map<number, StoredLine>,
): Map<number, number> {
  const prices = new Map([...facts.items].map(([id, item]) => [id, item.price]));
  const errors: FieldError[] = [];
  for (const line of wanted.values()) {
    if (!prices.has(line.item_id)) {
      for (const index of line.indexes)
        errors.push({ in: 'body', pointer: `#/lines/${index}/item_id`, detail: `there is no item ${line.item_id}` });
    }
    const captured = current.get(line.item_id);
    if (captured) prices.set(line.item_id, captured.unit_price);
  }
  if (errors.length > 0)
    throw new UnprocessableError(
      `The order names items that do not exist: ${errors.map((error) => error.pointer).join(', ')}.`,
      errors,
      'unknown-reference',
    );
  return prices;
}

/** Every line whose additional units exceed the unreserved stock; 409 listing all of them (with the stock available when the caller may read stock). */
export function assertStockCovers(
  facts: PlacementFacts,
  wanted: Map<number, WantedLine>,
  current: Map<number, StoredLine>,
  showsAvailable: boolean,
): void {
  const short: ShortLine[] = [];
  for (const line of wanted.values()) {
    const stock = facts.items.get(line.item_id)?.available;
    // Every item has its stock row from its creation: none means the item was deleted since it was priced (PostgreSQL).
    if (stock === undefined) throw itemDeletedMeanwhile(line.item_id);
    const held = current.get(line.item_id)?.quantity ?? 0;
    const available = stock + held;
    if (line.quantity > available) short.push({ item_id: line.item_id, requested: line.quantity, available });
  }
  if (short.length > 0) throw insufficientStock(short, showsAvailable);
}

/** The moves that turn the current reservations into the wanted ones: only the difference. */
export function lineDifference(current: Map<number, StoredLine>, wanted: Map<number, WantedLine>): StockMove[] {
  const moves: StockMove[] = [];
  for (const itemId of new Set([...current.keys(), ...wanted.keys()])) {
    const difference = (wanted.get(itemId)?.quantity ?? 0) - (current.get(itemId)?.quantity ?? 0);
    if (difference > 0) moves.push({ itemId, kind: 'reserve', units: difference });
    if (difference < 0) moves.push({ itemId, kind: 'release', units: -difference });
  }
  return moves;
}

/** The order total in cents; 422 when it is too large to be represented exactly. */
export function totalOf(wanted: Map<number, WantedLine>, prices: Map<number, number>): number {
  let total = 0;
  for (const line of wanted.values()) total += line.quantity * prices.get(line.item_id)!;
  if (!Number.isSafeInteger(total)) {
    throw new UnprocessableError('The order total is too large to be represented exactly.', [
      { in: 'body', pointer: '#/lines', detail: 'the total of the lines is too large' },
    ]);
  }
  return total;
}

export function linesToStore(wanted: Map<number, WantedLine>, prices: Map<number, number>): NewLine[] {
  return [...wanted.values()].map((line) => ({
    item_id: line.item_id,
    position: line.position,
    quantity: line.quantity,
    unit_price: prices.get(line.item_id)!,
  }));
}

export function itemDeletedMeanwhile(itemId: number): ConflictError {
  return new ConflictError(
    'concurrent-change',
    `Item ${itemId} was deleted while this request ran; nothing was changed.`,
  );
}

/**
 * The 409 of an order that stock cannot cover. How many units are available is the stock's
 * business: a caller that may not read stock is told which lines are short, not by how much.
 */
export function insufficientStock(shortLines: ShortLine[], showsAvailable: boolean): ConflictError {
  if (showsAvailable) {
    const list = shortLines
      .map((line) => `item ${line.item_id}: ${line.requested} requested, ${line.available} available`)
      .join('; ');
    return new ConflictError(
      'insufficient-stock',
      `Stock cannot cover every line, so nothing was reserved (${list}).`,
      { short_lines: shortLines },
    );
  }
  const list = shortLines.map((line) => `item ${line.item_id}: ${line.requested} requested`).join('; ');
  return new ConflictError(
    'insufficient-stock',
    `Stock cannot cover every line, so nothing was reserved (${list}); how many are available is shown to callers that may read stock.`,
    {
      short_lines: shortLines.map((line) => ({ item_id: line.item_id, requested: line.requested })),
    },
  );
}
