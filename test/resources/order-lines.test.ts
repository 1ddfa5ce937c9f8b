import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import {
  assertStockCovers,
  lineDifference,
  linesToStore,
  mergeLines,
  priceLines,
  sameLines,
  totalOf,
  type PlacementFacts,
} from '../../src/resources/orders/order-lines.js';
import type { StoredLine } from '../../src/resources/orders/orders.repository.js';
import { MAX_LINE_QUANTITY } from '../../src/resources/orders/orders.schema.js';

/**
 * The pure arithmetic of an order's lines (src/resources/orders/order-lines.ts): what the request
 * asks for, merged, priced, checked against stock, and the stock moves between two sets of lines.
 * The routes' tests (orders.routes.test.ts) show the same rules through the API.
 */

/** What `fn` threw, for asserting the problem it becomes. */
function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('nothing was thrown');
}

const facts = (items: [number, { price: number; available: number | undefined }][]): PlacementFacts => ({
  userFound: true,
  items: new Map(items),
});

const stored = (lines: Omit<StoredLine, 'order_id'>[]): Map<number, StoredLine> =>
  new Map(lines.map((line) => [line.item_id, { order_id: 1, ...line }]));

describe('mergeLines', () => {
  it('merges the lines of one item at the position of the first, remembering where each came from', () => {
    const merged = mergeLines([
      { item_id: 7, quantity: 2 },
      { item_id: 3, quantity: 1 },
      { item_id: 7, quantity: 5 },
    ]);
    expect([...merged.values()]).toEqual([
      { item_id: 7, quantity: 7, position: 0, indexes: [0, 2] },
      { item_id: 3, quantity: 1, position: 1, indexes: [1] },
    ]);
  });

  it('refuses with 422 pointing at each line of an item whose lines add up to more than one line may hold', () => {
    const error = thrown(() =>
      mergeLines([
        { item_id: 7, quantity: MAX_LINE_QUANTITY },
        { item_id: 3, quantity: 1 },
        { item_id: 7, quantity: 1 },
      ]),
    );
    expect(error.status).toBe(422);
    expect(error.errors?.map((field) => field.pointer)).toEqual(['#/lines/0/quantity', '#/lines/2/quantity']);
  });

  it('takes an item up to exactly the bound of one line', () => {
    const merged = mergeLines([
      { item_id: 7, quantity: MAX_LINE_QUANTITY - 1 },
      { item_id: 7, quantity: 1 },
    ]);
    expect(merged.get(7)?.quantity).toBe(MAX_LINE_QUANTITY);
  });
});

describe('sameLines', () => {
  const wanted = mergeLines([
    { item_id: 7, quantity: 2 },
    { item_id: 3, quantity: 1 },
  ]);
  const line = (item_id: number, position: number, quantity: number): StoredLine => ({
    order_id: 1,
    item_id,
    position,
    quantity,
    unit_price: 1,
  });

  it('is true for the same items, quantities and positions', () => {
    expect(sameLines(wanted, [line(3, 1, 1), line(7, 0, 2)])).toBe(true);
  });

  it('is false when a quantity, a position or the number of lines differs', () => {
    expect(sameLines(wanted, [line(7, 0, 3), line(3, 1, 1)])).toBe(false);
    expect(sameLines(wanted, [line(7, 1, 2), line(3, 0, 1)])).toBe(false);
    expect(sameLines(wanted, [line(7, 0, 2)])).toBe(false);
  });
});

describe('priceLines and totalOf', () => {
  it("prices a new line at the item's price and a line already on the order at the price captured then", () => {
    const wanted = mergeLines([
      { item_id: 7, quantity: 2 },
      { item_id: 3, quantity: 3 },
    ]);
    const prices = priceLines(
      facts([
        [7, { price: 1000, available: 10 }],
        [3, { price: 250, available: 10 }],
      ]),
      wanted,
      stored([{ item_id: 7, position: 0, quantity: 1, unit_price: 900 }]),
    );
    expect(prices.get(7)).toBe(900);
    expect(prices.get(3)).toBe(250);
    expect(totalOf(wanted, prices)).toBe(2 * 900 + 3 * 250);
    expect(linesToStore(wanted, prices)).toEqual([
      { item_id: 7, position: 0, quantity: 2, unit_price: 900 },
      { item_id: 3, position: 1, quantity: 3, unit_price: 250 },
    ]);
  });

  it('refuses with 422 unknown-reference pointing at each line of an item that does not exist', () => {
    const wanted = mergeLines([
      { item_id: 9, quantity: 1 },
      { item_id: 7, quantity: 1 },
      { item_id: 9, quantity: 1 },
    ]);
    const error = thrown(() => priceLines(facts([[7, { price: 1, available: 1 }]]), wanted, new Map()));
    expect([error.status, error.type]).toEqual([422, 'unknown-reference']);
    expect(error.errors?.map((field) => field.pointer)).toEqual(['#/lines/0/item_id', '#/lines/2/item_id']);
  });

  it('refuses with 422 a total too large to be represented exactly', () => {
    const wanted = mergeLines([{ item_id: 7, quantity: MAX_LINE_QUANTITY }]);
    const error = thrown(() => totalOf(wanted, new Map([[7, Number.MAX_SAFE_INTEGER]])));
    expect(error.status).toBe(422);
    expect(error.errors?.[0]?.pointer).toBe('#/lines');
  });
});

describe('assertStockCovers', () => {
  const wanted = mergeLines([
    { item_id: 7, quantity: 5 },
    { item_id: 3, quantity: 4 },
  ]);

  it('passes when the unreserved stock plus what the order already holds covers each line', () => {
    expect(() =>
      assertStockCovers(
        facts([
          [7, { price: 1, available: 2 }],
          [3, { price: 1, available: 4 }],
        ]),
        wanted,
        stored([{ item_id: 7, position: 0, quantity: 3, unit_price: 1 }]),
        true,
      ),
    ).not.toThrow();
  });

  it('refuses with 409 listing every short line, with the stock available only when the caller may read stock', () => {
    const short = facts([
      [7, { price: 1, available: 1 }],
      [3, { price: 1, available: 0 }],
    ]);
    const shown = thrown(() => assertStockCovers(short, wanted, new Map(), true));
    expect([shown.status, shown.type]).toEqual([409, 'insufficient-stock']);
    expect(shown.extensions?.short_lines).toEqual([
      { item_id: 7, requested: 5, available: 1 },
      { item_id: 3, requested: 4, available: 0 },
    ]);
    const hidden = thrown(() => assertStockCovers(short, wanted, new Map(), false));
    expect(hidden.extensions?.short_lines).toEqual([
      { item_id: 7, requested: 5 },
      { item_id: 3, requested: 4 },
    ]);
  });

  it('refuses with 409 concurrent-change when an item lost its stock row since it was priced', () => {
    const error = thrown(() =>
      assertStockCovers(
        facts([
          [7, { price: 1, available: undefined }],
          [3, { price: 1, available: 9 }],
        ]),
        wanted,
        new Map(),
        true,
      ),
    );
    expect([error.status, error.type]).toEqual([409, 'concurrent-change']);
  });
});

describe('lineDifference', () => {
  it('reserves only what is added, releases what is taken away, and leaves unchanged lines alone', () => {
    const moves = lineDifference(
      stored([
        { item_id: 7, position: 0, quantity: 2, unit_price: 1 },
        { item_id: 3, position: 1, quantity: 5, unit_price: 1 },
        { item_id: 4, position: 2, quantity: 1, unit_price: 1 },
      ]),
      mergeLines([
        { item_id: 7, quantity: 6 },
        { item_id: 4, quantity: 1 },
        { item_id: 8, quantity: 2 },
      ]),
    );
    expect(moves).toEqual([
      { itemId: 7, kind: 'reserve', units: 4 },
      { itemId: 3, kind: 'release', units: 5 },
      { itemId: 8, kind: 'reserve', units: 2 },
    ]);
  });
});
