import Type from 'typebox';
import type { Collection } from '../../engine/collection.js';
import { resourceRoutes } from '../../engine/resource.js';
import { USER, USER_COLLECTION, UserSchema } from './users.schema.js';
import { sightOf } from '../../auth/visibility.js';
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
import { USERS as USER_RECORDS } from './users.service.js';

const USERS: Collection<typeof UserSchema> = {
  path: '/v1/users',
  name: 'users',
  singular: 'User',
  article: 'a',
  listing: USER_COLLECTION,
  record: UserSchema,
  page: USER.page,
  exports: true,
};

/** /v1/users: the operations every resource has (engine/resource.ts), and the user a token acts for. */
const usersRoutes = resourceRoutes({
  collection: USERS,
  service: USER_RECORDS,
  create: { summary: 'Create a user', body: USER.create },
  // Before /v1/users/:id in the document; Fastify prefers the static path whatever the order.
  routes: (app, service) => {
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
        const { access } = request.context!;
        const fields = selectFields({ record: UserSchema }, request.query.fields);
        if (access.userId === null)
          throw new NotFoundError(
            'This request acts for no user: /v1/users/me is the user a token acts for (POST /oauth/token with user_id).',
          );
        const user = await service.get(app.db, access.userId, sightOf(access, 'users'));
        return sendRecord(request, reply, user, 200, fields);
      },
    );
  },
  replace: USER.replace,
  patch: USER.patch,
  remove: { summary: 'Delete a user (409 while the user has placed orders)' },
  batch: { description: 'Two entries may not name one user, by id or by email (422 batch-invalid).' },
});

export default usersRoutes;
