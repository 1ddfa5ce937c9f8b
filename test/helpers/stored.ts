import type { TestApp } from './app.js';

/** What is stored, read straight from the database: what "nothing stored changed" is checked against. */

/** Every stored user row, in id order: what "nothing stored changed" is checked against. */
export function storedUsers(test: TestApp) {
  return test.storage.db.selectFrom('users').selectAll().orderBy('id').execute();
}

/**
 * Every stored item, stock, ledger, order and order-line row, in key order: what "nothing
 * stored changed" is checked against after a refused inventory or order request.
 */
export async function storedInventory(test: TestApp) {
  const db = test.storage.db;
  return {
    items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
    stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
    movements: await db.selectFrom('stock_movements').selectAll().orderBy('id').execute(),
    orders: await db.selectFrom('orders').selectAll().orderBy('id').execute(),
    lines: await db.selectFrom('order_lines').selectAll().orderBy('order_id').orderBy('item_id').execute(),
  };
}

/** How many operations (imports and backups) are stored: what "nothing was queued" is checked against. */
export async function storedOperationCount(test: TestApp): Promise<number> {
  const row = await test.storage.db
    .selectFrom('operations')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
