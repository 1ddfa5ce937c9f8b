import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import { answerList, withExports } from '../../http/export.js';
import { fieldsParameter, selectFields } from '../../http/fields.js';
import { listQuerySchema, parseListQuery } from '../../http/paging.js';
import { conditionOf, sendRecord, type VersionCondition } from '../../http/records.js';
import {
  CONDITIONAL_READ,
  CONDITIONAL_WRITE,
  IdParams,
  IfMatchHeaders,
  IfNoneMatchHeaders,
  REQUEST_BODY_TYPES,
  RESPONSE_HEADERS,
  noContent,
  operation,
  representation,
} from '../../http/schemas.js';
import { batchOperation, conditionOfEntry, recordResult, type BatchAction } from '../../engine/batches/batch.js';
import { expandedListing, withExpand, type Expansion } from '../../engine/reading/expansion.js';
import { expandHook } from '../../http/expand.js';
import {
  StockAdjustEntrySchema,
  StockSetEntrySchema,
  MOVEMENT_COLLECTION,
  MovementSchema,
  type Movement,
  StockPatchSchema,
  StockReplaceSchema,
  StockPageSchema,
  StockSchema,
  STOCK_COLLECTION,
} from './stock.schema.js';
import { adjustStock, getStock, listMovements, listStock, setStock, type StoredStock } from './stock.service.js';
import type { Trx } from '../../db/database.js';
import type { Sight } from '../../db/visibility.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { sightOf } from '../../auth/visibility.js';

/** The stock of an item is named by its item's id: that is what `fields` always answers. */
const STOCK_FIELDS = { record: StockSchema, identifier: 'item_id' };

/**
 * /v1/items/{id}/stock and its ledger: what inventory systems read and set. The records a movement
 * may embed (`expand`) are the API's to say (src/api/related-records.ts).
 */
const stockRoutes: FastifyPluginAsyncTypebox<{ movements: Expansion<Movement> }> = async (
  app,
  { movements: MOVEMENT_EXPANSION },
) => {
  const { db } = app;

  app.get(
    '/v1/items/stock',
    {
      schema: operation({
        operationId: 'listStock',
        permission: 'stock:read',
        summary: 'List the stock of items, by item (the stock of many items: ?id=)',
        description:
          'The stock of every item the caller sees, by item id; `id` (item ids, comma-separated or repeated) asks for those items only, in one call. An id of no item, or of one the caller may not see, is absent.',
        tags: ['stock'],
        querystring: listQuerySchema(STOCK_COLLECTION, STOCK_FIELDS),
        response: {
          200: withExports(representation(StockPageSchema, 'A page of stock', RESPONSE_HEADERS.link), StockSchema),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(STOCK_COLLECTION, request.query);
      const fields = selectFields(STOCK_FIELDS, request.query.fields);
      const sight = sightOf(request.context!.access, 'items');
      const list = (page: typeof query) => listStock(db, page, sight);
      return answerList(request, reply, { name: 'stock', record: StockSchema, query, list, fields }, app.config);
    },
  );

  app.get(
    '/v1/items/:id/stock',
    {
      schema: operation({
        operationId: 'getStock',
        permission: 'stock:read',
        summary: 'Read the stock of an item',
        description: `The item's on-hand quantity (not reserved), what open orders reserve, and the version as ETag. ${CONDITIONAL_READ}`,
        tags: ['stock'],
        params: IdParams,
        querystring: Type.Object({ fields: fieldsParameter(STOCK_FIELDS) }),
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(StockSchema, 'The stock', RESPONSE_HEADERS.etag),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      const fields = selectFields(STOCK_FIELDS, request.query.fields);
      const stock = await getStock(db, request.params.id, sightOf(request.context!.access, 'items'));
      return sendRecord(request, reply, stock, 200, fields);
    },
  );

  // PUT and PATCH take the same one field, so both set it; PATCH also takes a merge patch.
  for (const method of ['put', 'patch'] as const) {
    app[method](
      '/v1/items/:id/stock',
      {
        schema: operation({
          operationId: method === 'put' ? 'replaceStock' : 'patchStock',
          permission: 'stock:update',
          summary: `Set the on-hand (unreserved) quantity of an item${method === 'patch' ? ' (JSON Merge Patch)' : ''}`,
          description:
            "The inventory system's count: sets `quantity` (what is on hand and not reserved) and records a `set` movement with the change; `reserved` is read-only (orders move it). 200 with the stock as stored. " +
            CONDITIONAL_WRITE,
          tags: ['stock'],
          params: IdParams,
          headers: IfMatchHeaders,
          body: method === 'put' ? StockReplaceSchema : StockPatchSchema,
          ...(method === 'patch' ? { consumes: REQUEST_BODY_TYPES.patch } : {}),
          response: { 200: representation(StockSchema, 'The stock as stored', RESPONSE_HEADERS.etag) },
          problems: [412],
        }),
      },
      async (request, reply) => {
        const sight = sightOf(request.context!.access, 'items');
        const stock = await unitOfWork(db, (trx) =>
          setStock(trx, request.params.id, request.body, conditionOf(request), sight),
        );
        return sendRecord(request, reply, stock);
      },
    );
  }

  app.get(
    '/v1/items/:id/stock/movements',
    {
      preValidation: expandHook(MOVEMENT_EXPANSION.relations),
      schema: operation({
        operationId: 'listStockMovements',
        permission: 'stock:read',
        summary: 'List the stock movements of an item, newest first',
        description:
          'Every change of quantity or reserved, with the order that caused it: the sums of quantity_change and reserved_change over all movements equal the current quantity and reserved. `expand=order` embeds that order (and `order.user`, `order.lines.item` what it refers to), as if read on its own: it needs orders:read (and users:read, items:read), and an order the caller may not see is null.',
        tags: ['stock'],
        params: IdParams,
        querystring: withExpand(
          listQuerySchema(MOVEMENT_COLLECTION, MOVEMENT_EXPANSION.selectable),
          MOVEMENT_EXPANSION.relations,
        ),
        response: {
          200: withExports(
            representation(MOVEMENT_EXPANSION.page, 'A page of movements', RESPONSE_HEADERS.link),
            MOVEMENT_EXPANSION.record,
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(MOVEMENT_COLLECTION, request.query);
      const fields = selectFields(MOVEMENT_EXPANSION.selectable, request.query.fields);
      const { access } = request.context!;
      const sights = { items: sightOf(access, 'items'), orders: sightOf(access, 'orders') };
      const list = (page: typeof query) => listMovements(db, request.params.id, page, sights);
      const listing = { name: 'stock-movements', record: MovementSchema, query, list, fields };
      return answerList(request, reply, expandedListing(db, request, MOVEMENT_EXPANSION, listing), app.config);
    },
  );

  batchOperation(app, {
    path: '/v1/items/stock',
    resource: 'stock',
    singular: 'Stock',
    record: StockSchema,
    permission: 'stock:update',
    description:
      '`set` is PUT /v1/items/{item_id}/stock (`quantity`); `adjust` adds `by` units to the on-hand quantity without reading it first (a delivery, a count corrected): below 0 is 409. Each writes a `set` movement of its change. Two entries may not name one item.',
    actions: [STOCK_SET, STOCK_ADJUST],
  });
};

const stockPath = (itemId: number) => `/v1/items/${itemId}/stock`;
const itemOf = (entry: { item_id: number }) => [`item:${entry.item_id}`];

/**
 * A batch entry that updates an item's stock, as PUT or PATCH of /v1/items/{id}/stock would:
 * `write` stores its change, with the entry's If-Match and the items the caller sees.
 */
function stockAction<Entry extends typeof StockSetEntrySchema | typeof StockAdjustEntrySchema>(
  member: string,
  method: 'PUT' | 'PATCH',
  entry: Entry,
  write: (trx: Trx, entry: Static<Entry>, condition: VersionCondition, sight: Sight) => Promise<StoredStock>,
): BatchAction<Entry> {
  return {
    member,
    action: 'update',
    method,
    entry,
    targets: itemOf,
    run: async (trx, entry, context) => {
      const sight = sightOf(context.access, 'items');
      const stock = await write(trx, entry, conditionOfEntry(entry), sight);
      return recordResult(200, stockPath(entry.item_id), stock);
    },
  };
}

const STOCK_SET = stockAction('set', 'PUT', StockSetEntrySchema, (trx, entry, condition, sight) =>
  setStock(trx, entry.item_id, { quantity: entry.quantity }, condition, sight),
);

const STOCK_ADJUST = stockAction('adjust', 'PATCH', StockAdjustEntrySchema, (trx, entry, condition, sight) =>
  adjustStock(trx, entry.item_id, entry.by, condition, sight),
);

export default stockRoutes;
