import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { unitOfWork } from '../../db/unit-of-work.js';
import { fieldsParameter, selectFields, sendFields } from '../../http/fields.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { IdParams, RESPONSE_HEADERS, header, operation, representation } from '../../http/schemas.js';
import { getDelivery, listDeliveries, pingEndpoint, retryDelivery } from './deliveries.service.js';
import { endpointContext } from './endpoint-access.js';
import { WebhookEndpointHealthSchema } from './endpoint-health.schema.js';
import { getEndpointHealth } from './endpoint-health.service.js';
import {
  DELIVERIES_COLLECTION,
  DeliveryPageSchema,
  DeliveryParams,
  DeliverySchema,
  WHO_MAY_CHANGE,
} from './webhook-endpoints.schema.js';

const TAGS = ['webhook-endpoints'];

/** The deliveries of an endpoint, with every attempt; how they fare; retry by hand; a test event. */
export function registerDeliveryRoutes(app: FastifyInstance): void {
  const { db } = app;
  app.get(
    '/v1/webhook-endpoints/:id/health',
    {
      schema: operation({
        operationId: 'getWebhookEndpointHealth',
        permission: 'webhook-endpoints:read',
        summary: "Whether a webhook endpoint's receiver keeps up: its deliveries and attempts of the last 24 hours",
        description:
          'Its deliveries pending now and how long the oldest has waited (lag_ms); those that succeeded or went dead in the last 24 hours; the attempts of those hours, their success rate and the latest failure; when a delivery last succeeded. Counted at each request, never cached.',
        tags: TAGS,
        params: IdParams,
        response: {
          200: representation(
            WebhookEndpointHealthSchema,
            "The endpoint's health",
            { 'Cache-Control': header('private, no-store: counted at each request') },
            ['json'],
          ),
        },
      }),
    },
    async (request, reply) => {
      const health = await getEndpointHealth(db, (request.params as { id: number }).id);
      return reply.header('cache-control', 'private, no-store').send(health);
    },
  );

  app.get(
    '/v1/webhook-endpoints/:id/deliveries',
    {
      schema: operation({
        operationId: 'listWebhookDeliveries',
        permission: 'webhook-endpoints:read',
        summary: "List a webhook endpoint's deliveries, newest first, with their attempts",
        description:
          "A page of the endpoint's deliveries, newest first, each with every attempt (when, status code, duration, error); filter by `status` (pending, succeeded, dead).",
        tags: TAGS,
        params: IdParams,
        querystring: listQuerySchema(DELIVERIES_COLLECTION, { record: DeliverySchema }),
        response: { 200: representation(DeliveryPageSchema, 'A page of deliveries', RESPONSE_HEADERS.link, ['json']) },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(DELIVERIES_COLLECTION, request.query as Record<string, unknown>);
      const fields = selectFields({ record: DeliverySchema }, (request.query as { fields?: string }).fields);
      const page = await listDeliveries(db, (request.params as { id: number }).id, query);
      return sendPage(request, reply, page, query, fields);
    },
  );

  app.get(
    '/v1/webhook-endpoints/:id/deliveries/:delivery_id',
    {
      schema: operation({
        operationId: 'getWebhookDelivery',
        permission: 'webhook-endpoints:read',
        summary: 'Read one delivery with its attempts',
        description:
          'The delivery, its status and next attempt, with every attempt made (when, status code, duration, error).',
        tags: TAGS,
        params: DeliveryParams,
        querystring: Type.Object({ fields: fieldsParameter({ record: DeliverySchema }) }),
        response: { 200: representation(DeliverySchema, 'The delivery', {}, ['json']) },
      }),
    },
    async (request, reply) => {
      const params = request.params as { id: number; delivery_id: number };
      const fields = selectFields({ record: DeliverySchema }, (request.query as { fields?: string }).fields);
      return sendFields(request, reply, await getDelivery(db, params.id, params.delivery_id), fields);
    },
  );

  app.post(
    '/v1/webhook-endpoints/:id/deliveries/:delivery_id/retry',
    {
      schema: operation({
        operationId: 'retryWebhookDelivery',
        permission: 'webhook-endpoints:update',
        summary: 'Send a delivery again',
        description: `A succeeded or dead-lettered delivery becomes pending again, on a fresh retry schedule, and is sent within seconds, after the deliveries of its resource already in flight and before the later ones not yet sent (if the endpoint's owner may still read its event); it keeps its sequence. 409 while it is still pending, or when the endpoint is disabled. ${WHO_MAY_CHANGE}`,
        tags: TAGS,
        params: DeliveryParams,
        problems: [409],
        response: { 202: representation(DeliverySchema, 'The delivery, pending again', {}, ['json']) },
      }),
    },
    async (request, reply) => {
      const params = request.params as { id: number; delivery_id: number };
      const delivery = await unitOfWork(db, (trx) =>
        retryDelivery(trx, params.id, params.delivery_id, endpointContext(request.context!)),
      );
      return reply.code(202).send(delivery);
    },
  );

  app.post(
    '/v1/webhook-endpoints/:id/ping',
    {
      schema: operation({
        operationId: 'pingWebhookEndpoint',
        permission: 'webhook-endpoints:update',
        summary: 'Send a test event (webhook.ping) to a webhook endpoint',
        description: `A webhook.ping event is written and delivered to this endpoint only, signed and retried like any other; follow it at the Location given. 409 when the endpoint is disabled. ${WHO_MAY_CHANGE}`,
        tags: TAGS,
        params: IdParams,
        problems: [409],
        response: {
          202: representation(DeliverySchema, 'The delivery of the ping, pending', RESPONSE_HEADERS.location, ['json']),
        },
      }),
    },
    async (request, reply) => {
      const id = (request.params as { id: number }).id;
      const delivery = await unitOfWork(db, (trx) => pingEndpoint(trx, id, endpointContext(request.context!)));
      return reply.code(202).header('location', `/v1/webhook-endpoints/${id}/deliveries/${delivery.id}`).send(delivery);
    },
  );
}
