import { nowTimestamp } from '../../db/clock.js';
import { deleteAtVersion } from '../../db/versioned.js';
import type { Executor, Trx } from '../../db/database.js';
import { isUniqueViolation } from '../../db/driver-errors.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { ownerOf, recordEvent, recordEvents } from '../../outbox/outbox.js';
import { formatMinorUnits, toMinorUnits } from './money.js';
import type { VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertReadOnlyEchoes,
  withRowLocked,
  DELETED,
  VERSION_MOVED,
  written,
} from '../../engine/preconditions.js';
import { createdByDiffers } from '../../engine/ownership.js';
import {
  findItemById,
  findItems,
  insertItem,
  isItemOrdered,
  updateItemAtVersion,
  type StoredItem,
} from './items.repository.js';
import { insertStock } from './stock.repository.js';
import type { Item, ItemCreate, ItemPatch, ItemReplace } from './items.schema.js';

/** An item as the API shows it (the price as a decimal string), and the version its ETag comes from. */
export type ItemView = Item & { version: number };

export function presentItem(item: StoredItem): ItemView {
  return { ...item, price: formatMinorUnits(item.price) };
}

/** The item; 404 as well when the sight does not show it (its existence is not told). */
export async function getItem(db: Executor, id: number, sight: Sight): Promise<StoredItem> {
  const item = await findItemById(db, id, sight);
  if (!item) throw itemNotFound(id);
  return item;
}

export async function listItems(db: Executor, query: ListQuery, sight: Sight) {
  const page = await findItems(db, query, sight);
  return { ...page, rows: page.rows.map(presentItem) };
}

/** Creates the item and its stock, at quantity 0, in the caller's transaction, owned by `creator`. */
export async function createItem(trx: Trx, input: ItemCreate, creator: number | null): Promise<StoredItem> {
  const now = nowTimestamp();
  const item = await withSkuUniqueness(input.sku, () =>
    insertItem(trx, { name: input.name, sku: input.sku, price: toMinorUnits(input.price), created_by: creator, now }),
  );
  await insertStock(trx, item.id, now);
  await recordEvent(trx, 'item.created', itemPath(item.id), presentItem(item));
  return item;
}

export function replaceItem(
  trx: Trx,
  id: number,
  input: ItemReplace,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredItem> {
  return changeItem(trx, id, condition, sight, input, () => ({
    name: input.name,
    sku: input.sku,
    price: toMinorUnits(input.price),
  }));
}

export function patchItem(
  trx: Trx,
  id: number,
  patch: ItemPatch,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredItem> {
  return changeItem(trx, id, condition, sight, patch, (stored) => ({
    name: patch.name ?? stored.name,
    sku: patch.sku ?? stored.sku,
    price: patch.price === undefined ? stored.price : toMinorUnits(patch.price),
  }));
}

/** Deletes the item and its stock and ledger; refused while any order has a line of it. */
export async function deleteItem(trx: Trx, id: number, condition: VersionCondition, sight: Sight): Promise<void> {
  await withRowLocked(
    trx,
    { table: 'items', id },
    async () => {
      const stored = await getItem(trx, id, sight);
      assertCondition(condition, stored.version, `Item ${id}`);
      if (await isItemOrdered(trx, id)) {
        throw new ConflictError(
          'item-in-use',
          `Item ${id} is on orders; an item that has been ordered cannot be deleted.`,
        );
      }
      if (!(await deleteAtVersion(trx, 'items', id, stored.version))) return VERSION_MOVED;
      await recordEvents(trx, [
        { type: 'item.deleted', path: itemPath(id), data: { id }, owner: ownerOf('items', stored) },
      ]);
      return DELETED;
    },
    `Item ${id}`,
  );
}

async function changeItem(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  sight: Sight,
  body: ItemReplace | ItemPatch,
  next: (stored: StoredItem) => { name: string; sku: string; price: number },
): Promise<StoredItem> {
  return withRowLocked(
    trx,
    { table: 'items', id },
    async () => {
      const stored = await getItem(trx, id, sight);
      assertCondition(condition, stored.version, `Item ${id}`);
      assertReadOnlyEchoes(stored, body, createdByDiffers(stored, body));
      const wanted = next(stored);
      if (wanted.name === stored.name && wanted.sku === stored.sku && wanted.price === stored.price)
        return written(stored);
      const updated = await withSkuUniqueness(wanted.sku, () =>
        updateItemAtVersion(trx, id, stored.version, { ...wanted, now: nowTimestamp() }),
      );
      if (!updated) return VERSION_MOVED;
      await recordEvent(trx, 'item.updated', itemPath(id), presentItem(updated));
      return written(updated);
    },
    `Item ${id}`,
  );
}

async function withSkuUniqueness<T>(sku: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error, 'items.sku')) {
      throw new ConflictError('sku-taken', `Another item already has the SKU ${sku}.`, { conflicting_field: 'sku' });
    }
    throw error;
  }
}

const itemPath = (id: number) => `/v1/items/${id}`;

export function itemNotFound(id: number): NotFoundError {
  return new NotFoundError(`There is no item ${id}.`);
}
