import type { FastifyPluginAsync } from 'fastify';
import {
  changeOperation,
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  replaceOperation,
  type Collection,
} from '../collection.js';
import {
  ITEM_COLLECTION,
  ItemCreateSchema,
  ItemPageSchema,
  ItemPatchSchema,
  ItemReplaceSchema,
  ItemSchema,
} from './items.schema.js';
import { creatorOf } from '../../auth/visibility.js';
import { createItem, deleteItem, getItem, listItems, patchItem, presentItem, replaceItem } from './items.service.js';

const ITEMS: Collection = {
  path: '/v1/items',
  name: 'items',
  singular: 'Item',
  article: 'an',
  listing: ITEM_COLLECTION,
  record: ItemSchema,
  page: ItemPageSchema,
  present: presentItem,
};

/** /v1/items: the catalogue (docs/guide.md); creating an item creates its stock at 0. */
const itemsRoutes: FastifyPluginAsync = async (app) => {
  listOperation(app, ITEMS, { list: listItems });
  createOperation(app, ITEMS, {
    summary: 'Create an item (and its stock, at quantity 0)',
    body: ItemCreateSchema,
    create: (trx, body, request) => createItem(trx, body, creatorOf(request.principal)),
  });
  readOperation(app, ITEMS, { read: getItem });
  replaceOperation(app, ITEMS, { body: ItemReplaceSchema, replace: replaceItem });
  changeOperation(app, ITEMS, { body: ItemPatchSchema, change: patchItem });
  deleteOperation(app, ITEMS, {
    summary: 'Delete an item that is on no order (with its stock and stock ledger)',
    remove: deleteItem,
  });
};

export default itemsRoutes;
