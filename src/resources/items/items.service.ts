import type { Executor } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError, type NotFoundError } from '../../errors.js';
import { recordService } from '../../engine/records.js';
import { formatMinorUnits, toMinorUnits } from './money.js';
import { ITEM_COLUMNS, isItemOrdered, type StoredItem } from './items.repository.js';
import { insertStock } from './stock.repository.js';
import type { Item, ItemCreate } from './items.schema.js';

/** An item as the API shows it (the price as a decimal string), and the version its ETag comes from. */
export type ItemView = Item & { version: number };

export function presentItem(item: StoredItem): ItemView {
  return { ...item, price: formatMinorUnits(item.price) };
}

/**
 * Items as the engine stores them (engine/records.ts): a name, a SKU no two items share, and a price
 * in minor units (answered as a decimal string); creating one creates its stock at 0, and an item on
 * any order cannot be deleted.
 */
export const ITEMS = recordService<StoredItem, ItemCreate>({
  resource: 'items',
  path: '/v1/items',
  noun: 'Item',
  table: 'items',
  columns: ITEM_COLUMNS,
  writable: { name: (name) => name, sku: (sku) => sku, price: toMinorUnits },
  unique: {
    constraint: 'items.sku',
    field: 'sku',
    problem: 'sku-taken',
    detail: (sku) => `Another item already has the SKU ${sku}.`,
  },
  events: { created: 'item.created', updated: 'item.updated', deleted: 'item.deleted' },
  present: presentItem,
  afterCreate: (trx, item, now) => insertStock(trx, item.id, now).then(() => undefined),
  async beforeDelete(trx, item) {
    if (await isItemOrdered(trx, item.id))
      throw new ConflictError(
        'item-in-use',
        `Item ${item.id} is on orders; an item that has been ordered cannot be deleted.`,
      );
  },
});

/** The item; 404 as well when the sight does not show it (its existence is not told). */
export const getItem = (db: Executor, id: number, sight: Sight): Promise<StoredItem> => ITEMS.get(db, id, sight);

export async function listItems(db: Executor, query: ListQuery, sight: Sight) {
  const page = await ITEMS.list(db, query, sight);
  return { ...page, rows: page.rows.map(presentItem) };
}

export const itemNotFound = (id: number): NotFoundError => ITEMS.notFound(id);
