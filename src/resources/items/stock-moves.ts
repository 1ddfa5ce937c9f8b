import type { MovementKind } from '../../db/database.js';
import { ConflictError } from '../../errors.js';

/**
 * What an order does to stock, as plain values: the moves it makes, and the 409 when stock cannot
 * cover its lines. Pure, so that the order's own pure code (orders/order-lines.ts) can use them
 * without the stock service; stock.service.ts applies the moves.
 */

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
