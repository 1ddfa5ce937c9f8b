import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Config } from '../../config/config.js';
import type { AddressPolicy } from '../../outbox/ssrf.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { conditionOf, sendRecord } from '../../http/records.js';
import {
  CONDITIONAL_WRITE,
  IdParams,
  IfMatchHeaders,
  RESPONSE_HEADERS,
  operation,
  representation,
} from '../../http/schemas.js';
import { READ_ONLY, type Collection } from '../../engine/collection.js';
import { addOperations } from '../../engine/resource.js';
import { registerDeliveryRoutes } from './deliveries.routes.js';
import { endpointContext } from './endpoint-access.js';
import { WEBHOOK_ENDPOINTS_COLLECTION, WHO_MAY_CHANGE, webhookEndpointSchemas } from './webhook-endpoints.schema.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  patchEndpoint,
  rotateSecret,
  type EndpointView,
} from './webhook-endpoints.service.js';

/** /v1/webhook-endpoints: where events are POSTed, signed (docs/events.md). */
const webhookEndpointsRoutes: FastifyPluginAsyncTypebox<{ config: Config; policy: AddressPolicy }> = async (
  app,
  { config, policy },
) => {
  const { db } = app;
  const {
    WebhookEndpointCreateSchema,
    WebhookEndpointPageSchema,
    WebhookEndpointPatchSchema,
    WebhookEndpointSchema,
    WebhookEndpointWithSecretSchema,
  } = webhookEndpointSchemas();
  const ENDPOINTS: Collection<typeof WebhookEndpointSchema, EndpointView> = {
    path: '/v1/webhook-endpoints',
    name: 'webhook-endpoints',
    singular: 'WebhookEndpoint',
    article: 'a',
    listing: WEBHOOK_ENDPOINTS_COLLECTION,
    record: WebhookEndpointSchema,
    page: WebhookEndpointPageSchema,
    formats: ['json'],
  };
  const checkUrl = async (body: { url?: string }) => {
    if (body.url !== undefined) await policy.assertAllowed(body.url);
  };
  addOperations(app, {
    collection: ENDPOINTS,
    list: { list: listEndpoints },
    create: {
      summary: 'Create a webhook endpoint (its signing secret is in this answer only)',
      description:
        "Events of the types asked for, of the resources the caller may read, are POSTed to the URL as they commit, signed as Standard Webhooks says. The endpoint acts for the caller creating it, its owner (owner_caller_id): it is sent only what the owner may read at each delivery; the subject of an external issuer's token may not create one (403 webhook-endpoint-forbidden). The answer holds the signing secret: it is never shown again (rotate it to get a new one).",
      body: WebhookEndpointCreateSchema,
      createdRecord: WebhookEndpointWithSecretSchema,
      problems: [409, 422],
      check: checkUrl,
      create: (trx, body, context) => createEndpoint(trx, body, endpointContext(context)),
    },
    read: { read: getEndpoint },
    change: {
      summary: "Change a webhook endpoint's URL, events, description, or enable it again (JSON Merge Patch)",
      description: `JSON Merge Patch (RFC 7396): the fields given change, the others stay; 200 with the endpoint as stored. ${READ_ONLY} ${WHO_MAY_CHANGE} Only its owner may change its URL. Enabling an endpoint whose owner was deleted makes the caller its owner. ${CONDITIONAL_WRITE}`,
      body: WebhookEndpointPatchSchema,
      check: checkUrl,
      change: (trx, id, body, condition, _sight, context) =>
        patchEndpoint(trx, id, body, condition, endpointContext(context)),
    },
    remove: {
      summary: 'Delete a webhook endpoint and its deliveries',
      description: `Deletes the endpoint and its deliveries: 204. ${WHO_MAY_CHANGE} ${CONDITIONAL_WRITE}`,
      remove: (trx, id, condition, _sight, context) => deleteEndpoint(trx, id, condition, endpointContext(context)),
    },
  });

  app.post(
    '/v1/webhook-endpoints/:id/rotate-secret',
    {
      schema: operation({
        operationId: 'rotateWebhookSecret',
        permission: 'webhook-endpoints:update',
        summary: "Rotate a webhook endpoint's signing secret",
        description: `A new secret, in this answer only. The previous one keeps signing beside it (two signatures in webhook-signature) for ROWI_WEBHOOK_SECRET_OVERLAP seconds (${config.webhookSecretOverlap} here), so receivers can switch without losing a delivery; 409 while that overlap lasts. ${WHO_MAY_CHANGE}`,
        tags: ['webhook-endpoints'],
        params: IdParams,
        headers: IfMatchHeaders,
        problems: [409, 412],
        response: {
          200: representation(
            WebhookEndpointWithSecretSchema,
            'The endpoint with its new secret',
            RESPONSE_HEADERS.etag,
            ['json'],
          ),
        },
      }),
    },
    async (request, reply) => {
      const rotated = await unitOfWork(db, (trx) =>
        rotateSecret(
          trx,
          request.params.id,
          conditionOf(request),
          config.webhookSecretOverlap,
          endpointContext(request.context!),
        ),
      );
      return sendRecord(request, reply, rotated);
    },
  );

  registerDeliveryRoutes(app);
};

export default webhookEndpointsRoutes;
