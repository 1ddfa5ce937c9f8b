import type { Collection } from '../../engine/collection.js';
import { resourceRoutes } from '../../engine/resource.js';
import { ITEM, ITEM_COLLECTION, ItemSchema } from './items.schema.js';
import { ITEMS as ITEM_RECORDS, presentItem } from './items.service.js';
import type { StoredItem } from './items.repository.js';

const ITEMS: Collection<typeof ItemSchema, StoredItem> = {
  path: '/v1/items',
  name: 'items',
  singular: 'Item',
  article: 'an',
  listing: ITEM_COLLECTION,
  record: ItemSchema,
  page: ITEM.page,
  exports: true,
  present: presentItem,
};

/** /v1/items: the catalogue (docs/guide.md); creating an item creates its stock at 0. */
const itemsRoutes = resourceRoutes({
  collection: ITEMS,
  service: ITEM_RECORDS,
  create: { summary: 'Create an item (and its stock, at quantity 0)', body: ITEM.create },
  replace: ITEM.replace,
  patch: ITEM.patch,
  remove: { summary: 'Delete an item that is on no order (with its stock and stock ledger)' },
  batch: {
    description:
      'Creating an item creates its stock at 0, as the single POST does. Two entries may not name one item, by id or by SKU (422 batch-invalid).',
  },
});

export default itemsRoutes;
