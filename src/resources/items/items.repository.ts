import { sql } from 'kysely';
import {
  BULK_ROWS_PER_INSERT,
  compiledKeyLists,
  compiledRowInserts,
  compiledRowWrites,
  type RowsInto,
} from '../../db/compiled.js';
import type { Executor, ItemRow } from '../../db/database.js';
import { isSqlite } from '../../db/dialect.js';
import { eitherParameters, visibleInEither, whereVisible, type Sight } from '../../db/visibility.js';

export const ITEM_COLUMNS = [
  'id',
  'name',
  'sku',
  'price',
  'created_by',
  'created_at',
  'updated_at',
  'version',
] as const;
export type StoredItem = Pick<ItemRow, (typeof ITEM_COLUMNS)[number]>;

/** The items among `ids` that exist, with their current prices. */
export function findItemPrices(db: Executor, ids: number[]): Promise<{ id: number; price: number }[]> {
  return db.selectFrom('items').select(['id', 'price']).where('id', 'in', ids).execute();
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

/**
 * The items that have one of these SKUs (an import's chunk), each with whether the sight shows it:
 * a SKU is taken whoever's item has it (SKUs are unique), but only an item the sight shows may be
 * changed or skipped as the importer's own.
 */
export async function findItemsBySkus(
  db: Executor,
  skus: string[],
  sight: Sight,
): Promise<(StoredItem & { visible: boolean })[]> {
  const rows = await selectItemsBySkus(db, skus, eitherParameters('items', sight)[0]);
  return rows.map(({ visible, ...item }) => ({ ...item, visible: Number(visible) === 1 }));
}

const selectItemsBySkus = compiledKeyLists(BULK_ROWS_PER_INSERT, (db, skus, owner: number | null) =>
  db
    .selectFrom('items')
    .select(ITEM_COLUMNS)
    .select(sql<number>`case when ${visibleInEither('items', 'items', owner)} then 1 else 0 end`.as('visible'))
    .where('sku', 'in', skus as string[]),
);

/**
 * Inserts many items, in multi-row statements. Only the ids are new: the rest of each item is what
 * was inserted (no column has a default or trigger that changes it).
 *
 * - PostgreSQL: a SKU taken meanwhile by a concurrent request is left out rather than failing the
 *   statement (`on conflict do nothing`), and the ids and SKUs of the rows inserted come back
 *   (`returning`), so the caller sees which rows it got.
 * - SQLite: nothing can take a SKU between the caller's read of them and this insert in one unit of
 *   work (its group holds the write lock, and runs one unit at a time), so a SKU taken is an error,
 *   and the ids are not returned but counted: a statement's new rows take consecutive ids
 *   (AUTOINCREMENT, one writer), the last of them its last rowid. `returning` made SQLite keep
 *   every row of a statement aside before handing it back (bench/NOTES.md "Imports").
 */
export async function insertItems(
  db: Executor,
  items: { name: string; sku: string; price: number; created_by: number | null }[],
  now: string,
): Promise<StoredItem[]> {
  const values: unknown[] = [];
  for (const item of items) values.push(item.name, item.sku, item.price, item.created_by, 1, now, now);
  // ITEM_COLUMNS' order, as a read gives it (an event's data is the item's JSON).
  const stored = (id: number, item: (typeof items)[number]): StoredItem => ({
    id,
    name: item.name,
    sku: item.sku,
    price: item.price,
    created_by: item.created_by,
    created_at: now,
    updated_at: now,
    version: 1,
  });
  if (isSqlite(db)) {
    const inserted: StoredItem[] = [];
    for (const statement of await insertItemRowsCounted(db, values)) {
      if (statement.changes !== statement.rows)
        throw new Error(`inserting ${statement.rows} items inserted ${statement.changes}`);
      for (let id = statement.lastId - statement.rows + 1; id <= statement.lastId; id++)
        inserted.push(stored(id, items[inserted.length]!));
    }
    return inserted;
  }
  const bySku = new Map(items.map((item) => [item.sku, item]));
  return (await insertItemRows(db, values)).map(({ id, sku }) => stored(id, bySku.get(sku)!));
}

const NEW_ITEM_FIELDS = ['name', 'sku', 'price', 'created_by', 'version', 'created_at', 'updated_at'] as const;
const NEW_ITEMS: RowsInto<'items'> = {
  table: 'items',
  columns: NEW_ITEM_FIELDS,
  types: ['text', 'text', 'bigint', 'bigint', 'integer', 'text', 'text'],
};
const insertItemRows = compiledRowInserts(BULK_ROWS_PER_INSERT, NEW_ITEMS, (insert) =>
  insert.onConflict((conflict) => conflict.column('sku').doNothing()).returning(['id', 'sku']),
);
const insertItemRowsCounted = compiledRowWrites(BULK_ROWS_PER_INSERT, NEW_ITEMS);

/** The items among `ids` that exist and the sight shows (those an import may set the stock of). */
export async function findVisibleItemIds(db: Executor, ids: number[], sight: Sight): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await whereVisible(db.selectFrom('items').select('id').where('id', 'in', ids), 'items', sight).execute();
  return new Set(rows.map((row) => Number(row.id)));
}

/**
 * The name and price of many items at once (an import's on_conflict=update), each only while it is
 * at the version read: one UPDATE … FROM (VALUES …) for them all; the items it changed come back
 * (one missing changed meanwhile). The VALUES columns are column1 … column4 on both databases; the
 * first row's casts type them for PostgreSQL.
 */
export async function updateItemsAtVersions(
  db: Executor,
  changes: readonly { id: number; version: number; name: string; price: number }[],
  now: string,
): Promise<StoredItem[]> {
  if (changes.length === 0) return [];
  const rows = changes.map((change, index) =>
    index === 0
      ? sql`(cast(${change.id} as bigint), cast(${change.version} as integer), cast(${change.name} as text), cast(${change.price} as bigint))`
      : sql`(${change.id}, ${change.version}, ${change.name}, ${change.price})`,
  );
  const { rows: updated } = await sql<StoredItem>`update items
    set name = changed.column3, price = changed.column4, version = items.version + 1, updated_at = ${now}
    from (values ${sql.join(rows)}) as changed
    where items.id = changed.column1 and items.version = changed.column2
    returning ${sql.join(ITEM_COLUMNS.map((column) => sql.ref(`items.${column}`)))}`.execute(db);
  return updated;
}
