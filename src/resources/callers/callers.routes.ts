import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdempotencyHeaders, runIdempotent } from '../../http/idempotency.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { conditionOf, sendCreated, sendEmpty, sendRecord } from '../../http/records.js';
import { IfMatchHeaders, IfNoneMatchHeaders, REQUEST_BODY_TYPES, RESPONSE_HEADERS, noContent, operation, representation } from '../../http/schemas.js';
import {
  API_KEY_COLLECTION,
  ApiKeyCreateSchema,
  ApiKeyPageSchema,
  ApiKeyParams,
  ApiKeySchema,
  CALLER_COLLECTION,
  CallerCreateSchema,
  CallerPageSchema,
  CallerParams,
  CallerPatchSchema,
  CallerSchema,
  NewApiKeySchema,
} from './callers.schema.js';
import { createApiKey, createCaller, deleteCaller, getApiKey, getCaller, listApiKeys, listCallers, patchCaller, revokeKey } from './callers.service.js';
import { unitOfWork } from '../../db/unit-of-work.js';

/**
 * /v1/callers and their keys (README "Security"), for admins. Every change forgets what this instance
 * believed about callers and keys, so a revoked key or a narrowed role takes effect at once here,
 * and tells the other instances on the database (Signals), which forget as soon as they hear it
 * (within FRESH_MS in any case).
 */
const callersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db, auth } = app;

  app.get('/v1/callers', {
    schema: operation({
      operationId: 'listCallers',
      permission: 'callers:read',
      summary: 'List callers',
      tags: ['callers'],
      querystring: listQuerySchema(CALLER_COLLECTION),
      response: { 200: representation(CallerPageSchema, 'A page of callers', RESPONSE_HEADERS.link) },
    }),
  }, async (request, reply) => {
    const query = parseListQuery(CALLER_COLLECTION, request.query);
    return sendPage(request, reply, await listCallers(db, query), query);
  });

  app.post('/v1/callers', {
    schema: operation({
      operationId: 'createCaller',
      permission: 'callers:create',
      summary: 'Create a caller (then give it a key with POST /v1/callers/{id}/keys)',
      tags: ['callers'],
      headers: IdempotencyHeaders,
      body: CallerCreateSchema,
      response: { 201: representation(CallerSchema, 'Created', { ...RESPONSE_HEADERS.location, ...RESPONSE_HEADERS.etag, ...RESPONSE_HEADERS.replayed }) },
      problems: [409],
    }),
  }, async (request, reply) => {
    const result = await runIdempotent(db, request, async (trx) => {
      const caller = await createCaller(trx, request.body);
      return { status: 201, body: caller, location: `/v1/callers/${caller.id}`, version: caller.version };
    });
    return sendCreated(request, reply, result);
  });

  app.get('/v1/callers/:id', {
    schema: operation({
      operationId: 'getCaller',
      permission: 'callers:read',
      summary: 'Read one caller',
      tags: ['callers'],
      params: CallerParams,
      headers: IfNoneMatchHeaders,
      response: { 200: representation(CallerSchema, 'The caller', RESPONSE_HEADERS.etag), 304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag) },
    }),
  }, async (request, reply) => sendRecord(request, reply, await getCaller(db, request.params.id)));

  app.patch('/v1/callers/:id', {
    schema: operation({
      operationId: 'patchCaller',
      permission: 'callers:update',
      summary: 'Change a caller\'s name, role or grants (JSON Merge Patch)',
      tags: ['callers'],
      params: CallerParams,
      headers: IfMatchHeaders,
      body: CallerPatchSchema,
      consumes: REQUEST_BODY_TYPES.patch,
      response: { 200: representation(CallerSchema, 'The caller as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const caller = await unitOfWork(db, (trx) => patchCaller(trx, request.params.id, request.body, conditionOf(request)));
    await auth.forget();
    return sendRecord(request, reply, caller);
  });

  app.delete('/v1/callers/:id', {
    schema: operation({
      operationId: 'deleteCaller',
      permission: 'callers:delete',
      summary: 'Delete a caller and its keys (its audit events stay)',
      tags: ['callers'],
      params: CallerParams,
      headers: IfMatchHeaders,
      response: { 204: noContent('Deleted') },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    await unitOfWork(db, (trx) => deleteCaller(trx, request.params.id, conditionOf(request)));
    await auth.forget();
    return sendEmpty(reply, 204);
  });

  app.get('/v1/callers/:id/keys', {
    schema: operation({
      operationId: 'listApiKeys',
      permission: 'callers:read',
      summary: 'List a caller\'s API keys (never the keys themselves)',
      tags: ['callers'],
      params: CallerParams,
      querystring: listQuerySchema(API_KEY_COLLECTION),
      response: { 200: representation(ApiKeyPageSchema, 'A page of keys', RESPONSE_HEADERS.link) },
    }),
  }, async (request, reply) => {
    const query = parseListQuery(API_KEY_COLLECTION, request.query);
    return sendPage(request, reply, await listApiKeys(db, request.params.id, query), query);
  });

  app.post('/v1/callers/:id/keys', {
    schema: operation({
      operationId: 'createApiKey',
      permission: 'callers:create',
      summary: 'Create an API key for a caller; the key is in this response only',
      tags: ['callers'],
      params: CallerParams,
      body: ApiKeyCreateSchema,
      response: { 201: representation(NewApiKeySchema, 'Created; store `key` now, it is never shown again', RESPONSE_HEADERS.location) },
    }),
  }, async (request, reply) => {
    const { record, key } = await unitOfWork(db, (trx) => createApiKey(trx, request.params.id, request.body ?? {}));
    reply.header('cache-control', 'no-store');
    return reply.code(201).header('location', `/v1/callers/${record.caller_id}/keys/${record.id}`).send({ ...record, key });
  });

  app.get('/v1/callers/:id/keys/:key_id', {
    schema: operation({
      operationId: 'getApiKey',
      permission: 'callers:read',
      summary: 'Read one API key\'s record (not the key)',
      tags: ['callers'],
      params: ApiKeyParams,
      response: { 200: representation(ApiKeySchema, 'The key\'s record') },
    }),
  }, async (request) => getApiKey(db, request.params.id, request.params.key_id));

  app.delete('/v1/callers/:id/keys/:key_id', {
    schema: operation({
      operationId: 'revokeApiKey',
      permission: 'callers:delete',
      summary: 'Revoke an API key: it stops working at once on this instance, within a second everywhere',
      tags: ['callers'],
      params: ApiKeyParams,
      response: { 204: noContent('Revoked (or already revoked)') },
      // The last working key of the last caller that can manage callers stays (last-admin).
      problems: [409],
    }),
  }, async (request, reply) => {
    await unitOfWork(db, (trx) => revokeKey(trx, request.params.id, request.params.key_id));
    await auth.forget();
    return sendEmpty(reply, 204);
  });
};

export default callersRoutes;
