import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdempotencyHeaders, runIdempotent } from '../../http/idempotency.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { conditionOf, sendCreated, sendEmpty, sendRecord } from '../../http/records.js';
import { IdParams, IfMatchHeaders, IfNoneMatchHeaders, REQUEST_BODY_TYPES, RESPONSE_HEADERS, noContent, operation, representation } from '../../http/schemas.js';
import { ORDER_COLLECTION, OrderCreateSchema, OrderPageSchema, OrderPatchSchema, OrderReplaceSchema, OrderSchema } from './orders.schema.js';
import { deleteOrder, getOrder, listOrders, patchOrder, placeOrder, replaceOrder } from './orders.service.js';
import { unitOfWork } from '../../db/unit-of-work.js';

/** /v1/orders: orders that reserve stock atomically (README "Calling it"). */
const ordersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;

  app.get('/v1/orders', {
    schema: operation({
      operationId: 'listOrders',
      permission: 'orders:read',
      summary: 'List orders',
      tags: ['orders'],
      querystring: listQuerySchema(ORDER_COLLECTION),
      response: { 200: representation(OrderPageSchema, 'A page of orders', RESPONSE_HEADERS.link) },
    }),
  }, async (request, reply) => {
    const query = parseListQuery(ORDER_COLLECTION, request.query);
    return sendPage(request, reply, await listOrders(db, query), query);
  });

  app.post('/v1/orders', {
    // Placing orders spends from a tighter budget as well as the caller's own (README "Limits").
    config: { rateLimitBudget: 'orders-create' },
    schema: operation({
      operationId: 'placeOrder',
      permission: 'orders:create',
      summary: 'Place an order, reserving stock for every line or for none',
      description: 'All lines are reserved in one transaction; when stock cannot cover every line, nothing is reserved and the 409 insufficient-stock problem lists each short line in short_lines.',
      tags: ['orders'],
      headers: IdempotencyHeaders,
      body: OrderCreateSchema,
      response: {
        201: representation(OrderSchema, 'Placed', { ...RESPONSE_HEADERS.location, ...RESPONSE_HEADERS.etag, ...RESPONSE_HEADERS.replayed }),
      },
      problems: [409],
    }),
  }, async (request, reply) => {
    const result = await runIdempotent(db, request, async (trx) => {
      const order = await placeOrder(trx, request.body);
      return { status: 201, body: order, location: `/v1/orders/${order.id}`, version: order.version };
    });
    return sendCreated(request, reply, result);
  });

  app.get('/v1/orders/:id', {
    schema: operation({
      operationId: 'getOrder',
      permission: 'orders:read',
      summary: 'Read one order',
      tags: ['orders'],
      params: IdParams,
      headers: IfNoneMatchHeaders,
      response: { 200: representation(OrderSchema, 'The order', RESPONSE_HEADERS.etag), 304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag) },
    }),
  }, async (request, reply) => sendRecord(request, reply, await getOrder(db, request.params.id)));

  app.put('/v1/orders/:id', {
    schema: operation({
      operationId: 'replaceOrder',
      permission: 'orders:update',
      summary: 'Replace the name, user and lines of a placed order, re-reserving only the difference',
      tags: ['orders'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: OrderReplaceSchema,
      response: { 200: representation(OrderSchema, 'The order as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const order = await unitOfWork(db, (trx) => replaceOrder(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, order);
  });

  app.patch('/v1/orders/:id', {
    schema: operation({
      operationId: 'patchOrder',
      permission: 'orders:update',
      summary: 'Move an order to fulfilled or cancelled, or change some of its fields (JSON Merge Patch)',
      description: 'status: placed → fulfilled (reserved stock leaves inventory) or placed → cancelled (reserved stock returns); any other transition is 409 invalid-transition.',
      tags: ['orders'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: OrderPatchSchema,
      consumes: REQUEST_BODY_TYPES.patch,
      response: { 200: representation(OrderSchema, 'The order as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const order = await unitOfWork(db, (trx) => patchOrder(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, order);
  });

  app.delete('/v1/orders/:id', {
    schema: operation({
      operationId: 'deleteOrder',
      permission: 'orders:delete',
      summary: 'Delete an order, releasing the stock it still reserves',
      tags: ['orders'],
      params: IdParams,
      headers: IfMatchHeaders,
      response: { 204: noContent('Deleted') },
      problems: [412],
    }),
  }, async (request, reply) => {
    await unitOfWork(db, (trx) => deleteOrder(trx, request.params.id, conditionOf(request)));
    return sendEmpty(reply, 204);
  });
};

export default ordersRoutes;
