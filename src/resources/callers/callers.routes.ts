import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { fieldsParameter, selectFields, sendFields } from '../../http/fields.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { sendEmpty } from '../../http/records.js';
import { RESPONSE_HEADERS, header, noContent, operation, representation } from '../../http/schemas.js';
import type { Collection } from '../../engine/collection.js';
import { addOperations } from '../../engine/resource.js';
import {
  API_KEY_COLLECTION,
  ApiKeyCreateSchema,
  ApiKeyPageSchema,
  ApiKeyParams,
  ApiKeySchema,
  CALLER_COLLECTION,
  CallerParams,
  NewApiKeySchema,
  callerSchemas,
} from './callers.schema.js';
import { createApiKey, getApiKey, listApiKeys, revokeKey } from './api-keys.service.js';
import {
  createCaller,
  deleteCaller,
  getCaller,
  identityOf,
  listCallers,
  patchCaller,
  type CallerView,
} from './callers.service.js';
import Type from 'typebox';
import { unitOfWork } from '../../db/unit-of-work.js';

/**
 * /v1/callers and their keys (docs/security.md), for admins; and /v1/callers/me, who the request
 * is, for any credential. Every change forgets what this instance
 * believed about callers and keys, so a revoked key or a narrowed role takes effect at once here,
 * and tells the other instances on the database (Signals), which forget as soon as they hear it
 * (within FRESH_MS in any case).
 */
const callersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db, auth } = app;
  const { CallerCreateSchema, CallerPageSchema, CallerPatchSchema, CallerSchema, IdentitySchema } = callerSchemas();
  const callers: Collection<typeof CallerSchema, CallerView> = {
    path: '/v1/callers',
    name: 'callers',
    singular: 'Caller',
    article: 'a',
    listing: CALLER_COLLECTION,
    record: CallerSchema,
    page: CallerPageSchema,
    params: CallerParams,
    afterChange: () => auth.forget(),
  };

  // Before /v1/callers/:id in the document; Fastify prefers the static path whatever the order.
  app.get(
    '/v1/callers/me',
    {
      schema: operation({
        operationId: 'getIdentity',
        // Any valid credential, whatever its scopes: a caller that may not read callers may still ask who it is.
        permission: 'authenticated',
        summary: 'Who the request is: its caller, credential, scopes and record access',
        description:
          "Who signed the request, as rowi resolved its credential: the caller (or an external issuer's subject), its role, the kind of credential, the scopes this request holds (a token may hold fewer than its caller), its record access per owned resource and the user a token acts for (docs/access.md). Any valid API key or token may ask, whatever its scopes; 401 without one.",
        tags: ['callers'],
        response: {
          200: representation(IdentitySchema, 'Who the request is', {
            'Cache-Control': header('no-store: the answer is about the credential of this request'),
          }),
        },
      }),
    },
    async (request, reply) => reply.header('cache-control', 'no-store').send(identityOf(request.context!)),
  );

  addOperations(app, {
    collection: callers,
    list: { list: listCallers },
    create: {
      summary: 'Create a caller (then give it a key with POST /v1/callers/{id}/keys)',
      body: CallerCreateSchema,
      create: createCaller,
    },
    read: { read: getCaller },
    change: {
      summary: "Change a caller's name, role or grants (JSON Merge Patch)",
      body: CallerPatchSchema,
      change: patchCaller,
    },
    remove: { summary: 'Delete a caller and its keys (its audit events stay)', remove: deleteCaller },
  });

  app.get(
    '/v1/callers/:id/keys',
    {
      schema: operation({
        operationId: 'listApiKeys',
        permission: 'callers:read',
        summary: "List a caller's API keys (never the keys themselves)",
        description:
          "A page of the caller's keys: each one's id, prefix (the readable start of the key), description, expiry, last use and revocation; never the key, which rowi keeps only as a hash.",
        tags: ['callers'],
        params: CallerParams,
        querystring: listQuerySchema(API_KEY_COLLECTION, { record: ApiKeySchema }),
        response: { 200: representation(ApiKeyPageSchema, 'A page of keys', RESPONSE_HEADERS.link) },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(API_KEY_COLLECTION, request.query);
      const fields = selectFields({ record: ApiKeySchema }, request.query.fields);
      return sendPage(request, reply, await listApiKeys(db, request.params.id, query), query, fields);
    },
  );

  app.post(
    '/v1/callers/:id/keys',
    {
      schema: operation({
        operationId: 'createApiKey',
        permission: 'callers:create',
        summary: 'Create an API key for a caller; the key is in this response only',
        description:
          'A new key for the caller (several may be valid at once, to rotate without downtime), with an optional description and expiry. 201 with the key itself in `key`, shown this once: store it now.',
        tags: ['callers'],
        params: CallerParams,
        body: ApiKeyCreateSchema,
        response: {
          201: representation(
            NewApiKeySchema,
            'Created; store `key` now, it is never shown again',
            RESPONSE_HEADERS.location,
          ),
        },
      }),
    },
    async (request, reply) => {
      const { record, key } = await unitOfWork(db, (trx) => createApiKey(trx, request.params.id, request.body ?? {}));
      reply.header('cache-control', 'no-store');
      return reply
        .code(201)
        .header('location', `/v1/callers/${record.caller_id}/keys/${record.id}`)
        .send({ ...record, key });
    },
  );

  app.get(
    '/v1/callers/:id/keys/:key_id',
    {
      schema: operation({
        operationId: 'getApiKey',
        permission: 'callers:read',
        summary: "Read one API key's record (not the key)",
        description: "The key's record: prefix, description, expiry, last use and revocation; never the key.",
        tags: ['callers'],
        params: ApiKeyParams,
        querystring: Type.Object({ fields: fieldsParameter({ record: ApiKeySchema }) }),
        response: { 200: representation(ApiKeySchema, "The key's record") },
      }),
    },
    async (request, reply) => {
      const fields = selectFields({ record: ApiKeySchema }, request.query.fields);
      return sendFields(request, reply, await getApiKey(db, request.params.id, request.params.key_id), fields);
    },
  );

  app.delete(
    '/v1/callers/:id/keys/:key_id',
    {
      schema: operation({
        operationId: 'revokeApiKey',
        permission: 'callers:delete',
        summary: 'Revoke an API key: it stops working at once on this instance, within a second everywhere',
        description:
          'Revokes the key: requests with it are 401 invalid-credentials at once on this instance and within a second on every other process and instance; its record stays, with revoked_at. 204.',
        tags: ['callers'],
        params: ApiKeyParams,
        response: { 204: noContent('Revoked (or already revoked)') },
        // The last working key of the last caller that can manage callers stays (last-admin).
        problems: [409],
      }),
    },
    async (request, reply) => {
      await unitOfWork(db, (trx) => revokeKey(trx, request.params.id, request.params.key_id));
      await auth.forget();
      return sendEmpty(reply, 204);
    },
  );
};

export default callersRoutes;
