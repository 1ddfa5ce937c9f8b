import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { createEntries, deleteEntries, writeEntries } from '../../engine/batches/actions.js';
import { batchOperation } from '../../engine/batches/batch.js';
import {
  changeOperation,
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  replaceOperation,
  type Collection,
} from '../../engine/collection.js';
import {
  type ItemCreate,
  type ItemPatch,
  type ItemReplace,
  ITEM_COLLECTION,
  ItemCreateSchema,
  ItemPageSchema,
  ItemPatchSchema,
  ItemReplaceSchema,
  ItemSchema,
} from './items.schema.js';
import { creatorOf } from '../../auth/visibility.js';
import { createItem, deleteItem, getItem, listItems, patchItem, presentItem, replaceItem } from './items.service.js';
import type { StoredItem } from './items.repository.js';

const ITEMS: Collection<typeof ItemSchema, StoredItem> = {
  path: '/v1/items',
  name: 'items',
  singular: 'Item',
  article: 'an',
  listing: ITEM_COLLECTION,
  record: ItemSchema,
  page: ItemPageSchema,
  exports: true,
  present: presentItem,
};

/** /v1/items: the catalogue (docs/guide.md); creating an item creates its stock at 0. */
const itemsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  listOperation(app, ITEMS, { list: listItems });
  createOperation(app, ITEMS, {
    summary: 'Create an item (and its stock, at quantity 0)',
    body: ItemCreateSchema,
    create: (trx, body, request) => createItem(trx, body, creatorOf(request.principal, 'items')),
  });
  readOperation(app, ITEMS, { read: getItem });
  replaceOperation(app, ITEMS, { body: ItemReplaceSchema, replace: replaceItem });
  changeOperation(app, ITEMS, { body: ItemPatchSchema, change: patchItem });
  deleteOperation(app, ITEMS, {
    summary: 'Delete an item that is on no order (with its stock and stock ledger)',
    remove: deleteItem,
  });
  const sku = (value: string | undefined) => (value === undefined ? [] : [`sku:${value}`]);
  batchOperation(app, {
    path: ITEMS.path,
    resource: 'items',
    singular: 'Item',
    record: ItemSchema,
    permission: 'items:update',
    description:
      'Creating an item creates its stock at 0, as the single POST does. Two entries may not name one item, by id or by SKU (422 batch-invalid).',
    actions: [
      createEntries(
        ITEMS,
        ItemCreateSchema,
        (trx, body: ItemCreate, request) => createItem(trx, body, creatorOf(request.principal, 'items')),
        (entry: ItemCreate) => sku(entry.sku),
      ),
      writeEntries(ITEMS, 'replace', ItemReplaceSchema, replaceItem, (entry: ItemReplace & { id: number }) => [
        `id:${entry.id}`,
        ...sku(entry.sku),
      ]),
      writeEntries(ITEMS, 'change', ItemPatchSchema, patchItem, (entry: ItemPatch & { id: number }) => [
        `id:${entry.id}`,
        ...sku(entry.sku),
      ]),
      deleteEntries(ITEMS, deleteItem),
    ],
  });
};

export default itemsRoutes;
