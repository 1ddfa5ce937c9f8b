import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CANCEL_ORDERS } from '../../auth/policy.js';
import { sightOf } from '../../auth/visibility.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { conditionOf, sendRecord } from '../../http/records.js';
import { IdParams, IfMatchHeaders, RESPONSE_HEADERS, operation, representation } from '../../http/schemas.js';
import type { Collection } from '../../engine/collection.js';
import { addOperations, type App } from '../../engine/resource.js';
import {
  ORDER_COLLECTION,
  OrderCreateSchema,
  OrderPageSchema,
  OrderPatchSchema,
  OrderReplaceSchema,
  OrderSchema,
} from './orders.schema.js';
import type { Expansion } from '../../engine/reading/expansion.js';
import {
  deleteOrder,
  getOrder,
  listOrders,
  patchOrder,
  placeOrder,
  replaceOrder,
  type OrderView,
} from './orders.service.js';

/** What the descriptions of the operations that name a user or items say of the scopes that takes. */
const REFERENCES =
  'Naming a user, or items the order does not hold yet, needs users:read and items:read: without them the answer is 403 whether the user or items exist or not.';

const ORDERS: Collection<typeof OrderSchema> = {
  path: '/v1/orders',
  name: 'orders',
  singular: 'Order',
  article: 'an',
  listing: ORDER_COLLECTION,
  record: OrderSchema,
  page: OrderPageSchema,
  exports: true,
};

/**
 * /v1/orders: orders that reserve stock atomically (docs/guide.md). What differs from
 * other resources: placing spends from a tighter rate-limit budget, a replace re-reserves only
 * the difference, a change may move the status, and a delete releases what the order reserves.
 * The records an order may embed (`expand`) are the API's to say (src/api/related-records.ts).
 */
const ordersRoutes: FastifyPluginAsyncTypebox<{ expansion: Expansion<OrderView> }> = async (app, { expansion }) =>
  addOperations(app, {
    collection: ORDERS,
    list: { list: listOrders, expansion },
    create: {
      operationId: 'placeOrder',
      summary: 'Place an order, reserving stock for every line or for none',
      description: `All lines are reserved in one transaction; when stock cannot cover every line, nothing is reserved and the 409 insufficient-stock problem lists each short line in short_lines (with the quantity available to a caller with stock:read). ${REFERENCES}`,
      created: 'Placed',
      // Placing orders spends from a tighter budget as well as the caller's own, in a batch too
      // (docs/limits.md).
      config: { rateLimitBudget: 'orders-create' },
      body: OrderCreateSchema,
      create: (trx, body, context) => placeOrder(trx, body, context.access),
    },
    read: { read: getOrder, expansion },
    replace: {
      summary: 'Replace the name, user and lines of a placed order, re-reserving only the difference',
      body: OrderReplaceSchema,
      replace: (trx, id, body, condition, sight, context) =>
        replaceOrder(trx, id, body, condition, sight, context.access),
    },
    change: {
      summary: 'Move an order to fulfilled or cancelled, or change some of its fields (JSON Merge Patch)',
      description: `status: placed → fulfilled (reserved stock leaves inventory) or placed → cancelled (reserved stock returns); any other transition is 409 invalid-transition. ${REFERENCES}`,
      body: OrderPatchSchema,
      change: (trx, id, body, condition, sight, context) => patchOrder(trx, id, body, condition, sight, context.access),
    },
    after: { change: addCancel },
    remove: {
      summary: 'Delete an order, releasing the stock it still reserves',
      problems: [412],
      remove: deleteOrder,
    },
    batch: {
      description: `Every order of the batch reserves its stock in the one transaction: stock that cannot cover the last entry rolls back the reservations of the first (409 batch-entry-conflict, insufficient-stock in failed_entry), and the ledger stays balanced. Two entries may not name one order. ${REFERENCES}`,
    },
  });

/** POST /v1/orders/:id/cancel: the one change a caller with orders:cancel may make. */
function addCancel(app: App): void {
  app.post(
    '/v1/orders/:id/cancel',
    {
      schema: operation({
        operationId: 'cancelOrder',
        permission: CANCEL_ORDERS,
        summary: 'Cancel an order, returning the stock it reserves',
        description:
          'placed → cancelled, as PATCH {"status":"cancelled"} does, and nothing else: a caller that may cancel orders (orders:cancel: a sales channel, its own orders) need not be able to change or fulfil them. An order already cancelled is answered as it is; a fulfilled one is 409 invalid-transition. If-Match as on every write.',
        tags: ['orders'],
        params: IdParams,
        headers: IfMatchHeaders,
        problems: [409, 412],
        response: { 200: representation(OrderSchema, 'The order, cancelled', RESPONSE_HEADERS.etag) },
      }),
    },
    async (request, reply) => {
      const { access } = request.context!;
      const sight = sightOf(access, 'orders');
      const order = await unitOfWork(app.db, (trx) =>
        patchOrder(trx, request.params.id, { status: 'cancelled' }, conditionOf(request), sight, access),
      );
      return sendRecord(request, reply, order);
    },
  );
}

export default ordersRoutes;
