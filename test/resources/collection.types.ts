import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { Trx } from '../../src/db/database.js';
import type { BatchAction } from '../../src/engine/batches/batch.js';
import { createEntries } from '../../src/engine/batches/actions.js';
import { createOperation, readOperation, type Collection } from '../../src/engine/collection.js';
import { DELETED, withRowLocked } from '../../src/engine/preconditions.js';
import { USER, USER_COLLECTION, UserSchema } from '../../src/resources/users/users.schema.js';

/**
 * Type-level checks, run by `npm run typecheck` (this file is never executed): a resource's
 * declaration that does not fit its schemas does not compile. Each `@ts-expect-error` fails the
 * type check when the error it expects goes away, so loosening the engine's types fails here.
 */

type App = Parameters<FastifyPluginAsyncTypebox>[0];

const declared = {
  path: '/v1/users',
  name: 'users',
  singular: 'User',
  article: 'a',
  listing: USER_COLLECTION,
  record: UserSchema,
  page: USER.page,
} as const;

/** A user as a service might store it: `created_by` as text, which the schema answers as an integer. */
interface StoredAsText {
  id: number;
  name: string;
  email: string;
  created_by: string;
  created_at: string;
  updated_at: string;
  version: number;
}

export const plain: Collection<typeof UserSchema> = declared;
// @ts-expect-error present is required when what the services return is not what the schema answers
export const unpresented: Collection<typeof UserSchema, StoredAsText> = declared;
export const presentedCollection: Collection<typeof UserSchema, StoredAsText> = {
  ...declared,
  present: (stored) => ({ ...stored, created_by: Number(stored.created_by) }),
};

export function declarations(app: App, trx: Trx): void {
  createOperation(app, plain, {
    summary: 'Create a user',
    body: USER.create,
    // The body is typed by its schema: reading a field it does not have does not compile.
    // @ts-expect-error UserCreate has no `role`
    check: async (body) => void body.role,
    create: async (_trx, body) => ({ ...body, id: 1, created_by: null, created_at: '', updated_at: '', version: 1 }),
  });
  createOperation(app, plain, {
    summary: 'Create a user',
    body: USER.create,
    // @ts-expect-error what create returns must be a user as answered (here, without its email)
    create: async (_trx, body) => ({
      id: 1,
      name: body.name,
      created_by: null,
      created_at: '',
      updated_at: '',
      version: 1,
    }),
  });
  // @ts-expect-error read must return what the collection stores
  readOperation(app, presentedCollection, { read: async () => ({ version: 1 }) });

  createEntries(
    plain,
    USER.create,
    async (_trx, body) => ({ ...body, id: 1, created_by: null, created_at: '', updated_at: '', version: 1 }),
    // @ts-expect-error an entry is typed by its schema: a create entry has no id
    (entry) => [`id:${entry.id}`],
  );
  const entry = Type.Object({ item_id: Type.Integer() });
  const action: BatchAction<typeof entry> = {
    member: 'set',
    action: 'update',
    method: 'PUT',
    entry,
    // @ts-expect-error item_id is a number
    targets: (named) => [named.item_id.toUpperCase()],
    run: async (_trx, named) => ({ status: 200, location: `/v1/items/${named.item_id}/stock` }),
  };
  void action;

  // @ts-expect-error an attempt answers a LockedWrite, not true or undefined
  void withRowLocked(trx, { table: 'users', id: 1 }, async () => true, 'User 1');
  void withRowLocked(trx, { table: 'users', id: 1 }, async () => DELETED, 'User 1');
}
