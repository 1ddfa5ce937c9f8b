import type { Executor, ItemRow } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';

const ITEM_COLUMNS = ['id', 'name', 'sku', 'price', 'created_at', 'updated_at', 'version'] as const;
export type StoredItem = Pick<ItemRow, (typeof ITEM_COLUMNS)[number]>;

const selectItemById = compiledQuery((db, id: number) =>
  db.selectFrom('items').select(ITEM_COLUMNS).where('id', '=', id),
);

export async function findItemById(db: Executor, id: number): Promise<StoredItem | undefined> {
  const [item] = await selectItemById(db, id);
  return item;
}

export function findItems(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('items').select(ITEM_COLUMNS), query);
}

/** The items among `ids` that exist, with their current prices. */
export function findItemPrices(db: Executor, ids: number[]): Promise<{ id: number; price: number }[]> {
  return db.selectFrom('items').select(['id', 'price']).where('id', 'in', ids).execute();
}

export function insertItem(
  db: Executor,
  item: { name: string; sku: string; price: number; now: string },
): Promise<StoredItem> {
  return db
    .insertInto('items')
    .values({
      name: item.name,
      sku: item.sku,
      price: item.price,
      version: 1,
      created_at: item.now,
      updated_at: item.now,
    })
    .returning(ITEM_COLUMNS)
    .executeTakeFirstOrThrow();
}

export function updateItemAtVersion(
  db: Executor,
  id: number,
  version: number,
  changes: { name: string; sku: string; price: number; now: string },
): Promise<StoredItem | undefined> {
  return db
    .updateTable('items')
    .set({ name: changes.name, sku: changes.sku, price: changes.price, version: version + 1, updated_at: changes.now })
    .where('id', '=', id)
    .where('version', '=', version)
    .returning(ITEM_COLUMNS)
    .executeTakeFirst();
}

/** True when any order, open or closed, has a line of this item. */
export async function isItemOrdered(db: Executor, itemId: number): Promise<boolean> {
  const line = await db
    .selectFrom('order_lines')
    .select('order_id')
    .where('item_id', '=', itemId)
    .limit(1)
    .executeTakeFirst();
  return line !== undefined;
}
