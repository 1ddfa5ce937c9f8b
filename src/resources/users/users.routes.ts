import type { FastifyPluginAsync } from 'fastify';
import {
  changeOperation,
  createOperation,
  deleteOperation,
  listOperation,
  readOperation,
  replaceOperation,
  type Collection,
} from '../collection.js';
import {
  USER_COLLECTION,
  UserCreateSchema,
  UserPageSchema,
  UserPatchSchema,
  UserReplaceSchema,
  UserSchema,
} from './users.schema.js';
import { creatorOf } from '../../auth/visibility.js';
import { createUser, deleteUser, getUser, listUsers, patchUser, replaceUser } from './users.service.js';

const USERS: Collection = {
  path: '/v1/users',
  name: 'users',
  singular: 'User',
  article: 'a',
  listing: USER_COLLECTION,
  record: UserSchema,
  page: UserPageSchema,
};

/** /v1/users: the six operations every resource has (list, read, create, replace, change, delete) on users. */
const usersRoutes: FastifyPluginAsync = async (app) => {
  listOperation(app, USERS, { list: listUsers });
  createOperation(app, USERS, {
    summary: 'Create a user',
    body: UserCreateSchema,
    create: (trx, body, request) => createUser(trx, body, creatorOf(request.principal)),
  });
  readOperation(app, USERS, { read: getUser });
  replaceOperation(app, USERS, {
    body: UserReplaceSchema,
    replace: replaceUser,
  });
  changeOperation(app, USERS, {
    body: UserPatchSchema,
    change: patchUser,
  });
  deleteOperation(app, USERS, {
    summary: 'Delete a user (409 while the user has placed orders)',
    remove: deleteUser,
  });
};

export default usersRoutes;
