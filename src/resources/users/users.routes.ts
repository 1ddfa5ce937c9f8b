import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdempotencyHeaders, runIdempotent } from '../../http/idempotency.js';
import { listQuerySchema, parseListQuery, sendPage } from '../../http/paging.js';
import { conditionOf, sendCreated, sendEmpty, sendRecord } from '../../http/records.js';
import { IdParams, IfMatchHeaders, IfNoneMatchHeaders, REQUEST_BODY_TYPES, RESPONSE_HEADERS, noContent, operation, representation } from '../../http/schemas.js';
import { USER_COLLECTION, UserCreateSchema, UserPageSchema, UserPatchSchema, UserReplaceSchema, UserSchema } from './users.schema.js';
import { createUser, deleteUser, getUser, listUsers, patchUser, replaceUser } from './users.service.js';
import { unitOfWork } from '../../db/unit-of-work.js';


/** /v1/users: the six operations every resource has (list, read, create, replace, change, delete) on users. */
const usersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;

  app.get('/v1/users', {
    schema: operation({
      operationId: 'listUsers',
      permission: 'users:read',
      summary: 'List users',
      tags: ['users'],
      querystring: listQuerySchema(USER_COLLECTION),
      response: { 200: representation(UserPageSchema, 'A page of users', RESPONSE_HEADERS.link) },
    }),
  }, async (request, reply) => {
    const query = parseListQuery(USER_COLLECTION, request.query);
    return sendPage(request, reply, await listUsers(db, query), query);
  });

  app.post('/v1/users', {
    schema: operation({
      operationId: 'createUser',
      permission: 'users:create',
      summary: 'Create a user',
      tags: ['users'],
      headers: IdempotencyHeaders,
      body: UserCreateSchema,
      response: {
        201: representation(UserSchema, 'Created', { ...RESPONSE_HEADERS.location, ...RESPONSE_HEADERS.etag, ...RESPONSE_HEADERS.replayed }),
      },
      problems: [409],
    }),
  }, async (request, reply) => {
    const result = await runIdempotent(db, request, async (trx) => {
      const user = await createUser(trx, request.body);
      return { status: 201, body: user, location: `/v1/users/${user.id}`, version: user.version };
    });
    return sendCreated(request, reply, result);
  });

  app.get('/v1/users/:id', {
    schema: operation({
      operationId: 'getUser',
      permission: 'users:read',
      summary: 'Read one user',
      tags: ['users'],
      params: IdParams,
      headers: IfNoneMatchHeaders,
      response: { 200: representation(UserSchema, 'The user', RESPONSE_HEADERS.etag), 304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag) },
    }),
  }, async (request, reply) => sendRecord(request, reply, await getUser(db, request.params.id)));

  app.put('/v1/users/:id', {
    schema: operation({
      operationId: 'replaceUser',
      permission: 'users:update',
      summary: 'Replace a user\'s writable fields',
      tags: ['users'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: UserReplaceSchema,
      response: { 200: representation(UserSchema, 'The user as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const user = await unitOfWork(db, (trx) => replaceUser(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, user);
  });

  app.patch('/v1/users/:id', {
    schema: operation({
      operationId: 'patchUser',
      permission: 'users:update',
      summary: 'Change some fields of a user (JSON Merge Patch)',
      tags: ['users'],
      params: IdParams,
      headers: IfMatchHeaders,
      body: UserPatchSchema,
      consumes: REQUEST_BODY_TYPES.patch,
      response: { 200: representation(UserSchema, 'The user as stored', RESPONSE_HEADERS.etag) },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    const user = await unitOfWork(db, (trx) => patchUser(trx, request.params.id, request.body, conditionOf(request)));
    return sendRecord(request, reply, user);
  });

  app.delete('/v1/users/:id', {
    schema: operation({
      operationId: 'deleteUser',
      permission: 'users:delete',
      summary: 'Delete a user (409 while the user has placed orders)',
      tags: ['users'],
      params: IdParams,
      headers: IfMatchHeaders,
      response: { 204: noContent('Deleted') },
      problems: [409, 412],
    }),
  }, async (request, reply) => {
    await unitOfWork(db, (trx) => deleteUser(trx, request.params.id, conditionOf(request)));
    return sendEmpty(reply, 204);
  });
};

export default usersRoutes;
