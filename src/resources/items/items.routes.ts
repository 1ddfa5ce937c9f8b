import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdempotencyHeaders, runIdempotent } from '../../http/idempotency.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { conditionOf, sendCreated, sendEmpty, sendRecord } from '../../http/records.js';
import { IdParams, IfMatchHeaders, IfNoneMatchHeaders, REQUEST_BODY_TYPES, RESPONSE_HEADERS, noContent, operation, representation } from '../../http/schemas.js';
import { ITEM_COLLECTION, ItemCreateSchema, ItemPageSchema, ItemPatchSchema, ItemReplaceSchema, ItemSchema } from './items.schema.js';
import { createItem, deleteItem, getItem, listItems, patchItem, presentItem, replaceItem } from './items.service.js';
import { unitOfWork } from '../../db/unit-of-work.js';

/** /v1/items: the catalogue (README "Calling it"); creating an item creates its stock at 0. */
const itemsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;

  app.get('/v1/items', {
    schema: operation({
      operationId: 'listItems',
      permission: 'items:read',
      summary: 'List items',
      tags: ['items'],
      querystring: listQuerySchema(ITEM_COLLECTION),
      response: { 200: representation(ItemPageSchema, 'A page of items', RESPONSE_HEADERS.link) },
    }),
  }, async (request, reply) => {
    const query = parseListQuery(ITEM_COLLECTION, request.query);
    return sendPage(request, reply, await listItems(db, query), query);
  });

  app.post('/v1/items', {
    schema: operation({
      operationId: 'createItem',
      permission: 'items:create',
      summary: 'Create an item (and its stock, at quantity 0)',
      tags: ['items'],
      headers: IdempotencyHeaders,
      body: ItemCreateSchema,
      response: {
        201: representation(ItemSchema, 'Created', { ...RESPONSE_HEADERS.location, ...RESPONSE_HEADERS.etag, ...RESPONSE_HEADERS.replayed }),
      },
      problems: [409],
    }),
  }, async (request, reply) => {
    const result = await runIdempotent(db, request, async (trx) => {
      const item = await createItem(trx, request.body);
      return { status: 201, body: presentItem(item), location: `/v1/items/${item.id}`, version: item.version };
    });
    return sendCreated(request, reply, result);
  });

  app.get('/v1/items/:id', {
    schema: operation({
      operationId: 'getItem',
      permission: 'items:read',
      summary: 'Read one item',
      tags: ['items'],
      params: IdParams,
      headers: IfNoneMatchHeaders,
      response: { 200: representation(ItemSchema, 'The item', RESPONSE_HEADERS.etag), 304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag) },
    }),
  }, async (request, reply) => sendRecord(request, reply, presentItem(await getItem(db, request.params.id))));

  app.put('/v1/items/:id', {
    schema: operation({
      operationId: 'replaceItem',
      permission: 'items:update',
      summary: 'Replace an item\'s writable fields',
      tags: ['items'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: ItemReplaceSchema,
      response: { 200: representation(ItemSchema, 'The item as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const item = await unitOfWork(db, (trx) => replaceItem(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, presentItem(item));
  });

  app.patch('/v1/items/:id', {
    schema: operation({
      operationId: 'patchItem',
      permission: 'items:update',
      summary: 'Change some fields of an item (JSON Merge Patch)',
      tags: ['items'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: ItemPatchSchema,
      consumes: REQUEST_BODY_TYPES.patch,
      response: { 200: representation(ItemSchema, 'The item as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const item = await unitOfWork(db, (trx) => patchItem(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, presentItem(item));
  });

  app.delete('/v1/items/:id', {
    schema: operation({
      operationId: 'deleteItem',
      permission: 'items:delete',
      summary: 'Delete an item that is on no order (with its stock and stock ledger)',
      tags: ['items'],
      params: IdParams,
      headers: IfMatchHeaders,
      response: { 204: noContent('Deleted') },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    await unitOfWork(db, (trx) => deleteItem(trx, request.params.id, conditionOf(request)));
    return sendEmpty(reply, 204);
  });
};

export default itemsRoutes;
