import { nowTimestamp } from '../../db/clock.js';
import { deleteAtVersion } from '../../db/versioned.js';
import type { Executor, Trx } from '../../db/database.js';
import { isUniqueViolation } from '../../db/driver-errors.js';
import type { ListQuery } from '../../db/keyset.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { recordEvent } from '../../outbox/outbox.js';
import { hasPlacedOrders } from '../orders/orders.repository.js';
import type { VersionCondition } from '../../http/records.js';
import { assertCondition, assertReadOnlyEchoes, withRowLocked } from '../preconditions.js';
import {
  emailKey,
  findUserById,
  findUsers,
  insertUser,
  updateUserAtVersion,
  type StoredUser,
} from './users.repository.js';
import type { UserCreate, UserPatch, UserReplace } from './users.schema.js';

export type { StoredUser };
export { emailKey };

export async function getUser(db: Executor, id: number): Promise<StoredUser> {
  const user = await findUserById(db, id);
  if (!user) throw userNotFound(id);
  return user;
}

export function listUsers(db: Executor, query: ListQuery) {
  return findUsers(db, query);
}

export async function createUser(trx: Trx, input: UserCreate): Promise<StoredUser> {
  const user = await withEmailUniqueness(input.email, () =>
    insertUser(trx, { name: input.name, email: input.email, now: nowTimestamp() }),
  );
  await recordEvent(trx, 'user.created', userPath(user.id), user);
  return user;
}

export function replaceUser(
  trx: Trx,
  id: number,
  input: UserReplace,
  condition: VersionCondition,
): Promise<StoredUser> {
  return changeUser(trx, id, condition, input, () => ({ name: input.name, email: input.email }));
}

/** JSON Merge Patch: members present replace stored values; absent members stay. */
export function patchUser(trx: Trx, id: number, patch: UserPatch, condition: VersionCondition): Promise<StoredUser> {
  return changeUser(trx, id, condition, patch, (stored) => ({
    name: patch.name ?? stored.name,
    email: patch.email ?? stored.email,
  }));
}

export async function deleteUser(trx: Trx, id: number, condition: VersionCondition): Promise<void> {
  await withRowLocked(
    trx,
    { table: 'users', id },
    async () => {
      const stored = await getUser(trx, id);
      assertCondition(condition, stored.version, `User ${id}`);
      if (await hasPlacedOrders(trx, id)) {
        throw new ConflictError(
          'user-has-open-orders',
          `User ${id} has placed orders; fulfil, cancel or delete them first.`,
        );
      }
      if (!(await deleteAtVersion(trx, 'users', id, stored.version))) return undefined;
      await recordEvent(trx, 'user.deleted', userPath(id), { id });
      return true;
    },
    `User ${id}`,
  );
}

async function changeUser(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  body: UserReplace | UserPatch,
  next: (stored: StoredUser) => { name: string; email: string },
): Promise<StoredUser> {
  return withRowLocked(
    trx,
    { table: 'users', id },
    async () => {
      const stored = await getUser(trx, id);
      assertCondition(condition, stored.version, `User ${id}`);
      assertReadOnlyEchoes(stored, body);
      const wanted = next(stored);
      // A write that changes nothing keeps the version, so ETags held by clients stay valid.
      if (wanted.name === stored.name && wanted.email === stored.email) return stored;
      const updated = await withEmailUniqueness(wanted.email, () =>
        updateUserAtVersion(trx, id, stored.version, { ...wanted, now: nowTimestamp() }),
      );
      if (updated) await recordEvent(trx, 'user.updated', userPath(id), updated);
      return updated;
    },
    `User ${id}`,
  );
}

async function withEmailUniqueness<T>(email: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error, 'users.email_key')) {
      throw new ConflictError(
        'email-taken',
        `Another user already has the email ${emailKey(email)} (emails are compared without regard to case).`,
        {
          conflicting_field: 'email',
        },
      );
    }
    throw error;
  }
}

const userPath = (id: number) => `/v1/users/${id}`;

function userNotFound(id: number): NotFoundError {
  return new NotFoundError(`There is no user ${id}.`);
}
