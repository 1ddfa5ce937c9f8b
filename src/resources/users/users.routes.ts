import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { createEntries, deleteEntries, writeEntries } from '../../engine/batches/actions.js';
import { batchOperation } from '../../engine/batches/batch.js';
import {
  changeOperation,
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  replaceOperation,
  type Collection,
} from '../../engine/collection.js';
import {
  type UserCreate,
  type UserPatch,
  type UserReplace,
  USER_COLLECTION,
  UserCreateSchema,
  UserPageSchema,
  UserPatchSchema,
  UserReplaceSchema,
  UserSchema,
} from './users.schema.js';
import { creatorOf, sightOf } from '../../auth/visibility.js';
import { NotFoundError } from '../../errors.js';
import { fieldsParameter, selectFields } from '../../http/fields.js';
import { sendRecord } from '../../http/records.js';
import {
  CONDITIONAL_READ,
  IfNoneMatchHeaders,
  RESPONSE_HEADERS,
  noContent,
  operation,
  representation,
} from '../../http/schemas.js';
import { createUser, deleteUser, emailKey, getUser, listUsers, patchUser, replaceUser } from './users.service.js';

const USERS: Collection<typeof UserSchema> = {
  path: '/v1/users',
  name: 'users',
  singular: 'User',
  article: 'a',
  listing: USER_COLLECTION,
  record: UserSchema,
  page: UserPageSchema,
  exports: true,
};

/** /v1/users: the six operations every resource has (list, read, create, replace, change, delete) on users. */
const usersRoutes: FastifyPluginAsyncTypebox = async (app) => {
  listOperation(app, USERS, { list: listUsers });
  createOperation(app, USERS, {
    summary: 'Create a user',
    body: UserCreateSchema,
    create: (trx, body, request) => createUser(trx, body, creatorOf(request.principal, 'users')),
  });
  // Before /v1/users/:id in the document; Fastify prefers the static path whatever the order.
  app.get(
    '/v1/users/me',
    {
      schema: operation({
        operationId: 'getMe',
        permission: 'users:read',
        summary: 'Read the user the token acts for',
        description: `The user a token acts for (docs/access.md "Acting for a user"): a token from POST /oauth/token asked for with user_id, or an external issuer's token whose ROWI_JWT_USER_CLAIM names the user. 404 for a request that acts for no user, and once the user is deleted. ${CONDITIONAL_READ}`,
        tags: ['users'],
        querystring: Type.Object({ fields: fieldsParameter({ record: UserSchema }) }),
        headers: IfNoneMatchHeaders,
        problems: [404],
        response: {
          200: representation(UserSchema, 'The user', RESPONSE_HEADERS.etag),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      const principal = request.principal!;
      const fields = selectFields({ record: UserSchema }, request.query.fields);
      if (principal.userId === null)
        throw new NotFoundError(
          'This request acts for no user: /v1/users/me is the user a token acts for (POST /oauth/token with user_id).',
        );
      const user = await getUser(app.db, principal.userId, sightOf(principal, 'users'));
      return sendRecord(request, reply, user, 200, fields);
    },
  );
  readOperation(app, USERS, { read: getUser });
  replaceOperation(app, USERS, { body: UserReplaceSchema, replace: replaceUser });
  changeOperation(app, USERS, { body: UserPatchSchema, change: patchUser });
  deleteOperation(app, USERS, { summary: 'Delete a user (409 while the user has placed orders)', remove: deleteUser });
  // Two entries may not name one user, by id or by email (docs/bulk.md "Batches").
  const email = (value: string | undefined) => (value === undefined ? [] : [`email:${emailKey(value)}`]);
  batchOperation(app, {
    path: USERS.path,
    resource: 'users',
    singular: 'User',
    record: UserSchema,
    permission: 'users:update',
    description: 'Two entries may not name one user, by id or by email (422 batch-invalid).',
    actions: [
      createEntries(
        USERS,
        UserCreateSchema,
        (trx, body: UserCreate, request) => createUser(trx, body, creatorOf(request.principal, 'users')),
        (entry: UserCreate) => email(entry.email),
      ),
      writeEntries(USERS, 'replace', UserReplaceSchema, replaceUser, (entry: UserReplace & { id: number }) => [
        `id:${entry.id}`,
        ...email(entry.email),
      ]),
      writeEntries(USERS, 'change', UserPatchSchema, patchUser, (entry: UserPatch & { id: number }) => [
        `id:${entry.id}`,
        ...email(entry.email),
      ]),
      deleteEntries(USERS, deleteUser),
    ],
  });
};

export default usersRoutes;
