import type { Executor, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError } from '../../errors.js';
import { recordService } from '../../engine/records.js';
import { hasPlacedOrders } from '../orders/orders.repository.js';
import { emailKey, USER_COLUMNS, type StoredUser } from './users.repository.js';
import type { UserCreate } from './users.schema.js';

export type { StoredUser };
export { emailKey };

/**
 * Users as the engine stores them (engine/records.ts): a name and an email, unique without regard
 * to case (its key is stored beside it), owned by the caller that created them; a user who has
 * placed orders cannot be deleted.
 */
export const USERS = recordService<StoredUser, UserCreate>({
  resource: 'users',
  path: '/v1/users',
  noun: 'User',
  table: 'users',
  columns: USER_COLUMNS,
  writable: { name: (name) => name, email: (email) => email },
  derived: (fields) => ({ email_key: emailKey(fields.email) }),
  unique: {
    constraint: 'users.email_key',
    field: 'email',
    key: emailKey,
    column: 'email_key',
    problem: 'email-taken',
    detail: (email) =>
      `Another user already has the email ${emailKey(email)} (emails are compared without regard to case).`,
  },
  events: { created: 'user.created', updated: 'user.updated', deleted: 'user.deleted' },
  async beforeDelete(trx, user) {
    if (await hasPlacedOrders(trx, user.id))
      throw new ConflictError(
        'user-has-open-orders',
        `User ${user.id} has placed orders; fulfil, cancel or delete them first.`,
      );
  },
});

/** The user; 404 as well when the sight does not show it (its existence is not told). */
export const getUser = (db: Executor, id: number, sight: Sight): Promise<StoredUser> => USERS.get(db, id, sight);
export const listUsers = (db: Executor, query: ListQuery, sight: Sight) => USERS.list(db, query, sight);
/** Creates the user, owned by `creator` (the caller; null for an external issuer's subject). */
export const createUser = (trx: Trx, input: UserCreate, creator: number | null): Promise<StoredUser> =>
  USERS.create(trx, input, creator);
