import { nowTimestamp } from '../../db/clock.js';
import { deleteAtVersion } from '../../db/versioned.js';
import type { Executor, Trx } from '../../db/database.js';
import { isUniqueViolation } from '../../db/driver-errors.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { ownerOf, recordEvent, recordEvents } from '../../outbox/outbox.js';
import { hasPlacedOrders } from '../orders/orders.repository.js';
import type { VersionCondition } from '../../http/records.js';
import {
  assertCondition,
  assertReadOnlyEchoes,
  withRowLocked,
  DELETED,
  VERSION_MOVED,
  written,
} from '../../engine/preconditions.js';
import { createdByDiffers } from '../../engine/ownership.js';
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

/** The user; 404 as well when the sight does not show it (its existence is not told). */
export async function getUser(db: Executor, id: number, sight: Sight): Promise<StoredUser> {
  const user = await findUserById(db, id, sight);
  if (!user) throw userNotFound(id);
  return user;
}

export function listUsers(db: Executor, query: ListQuery, sight: Sight) {
  return findUsers(db, query, sight);
}

/** Creates the user, owned by `creator` (the caller; null for an external issuer's subject). */
export async function createUser(trx: Trx, input: UserCreate, creator: number | null): Promise<StoredUser> {
  const user = await withEmailUniqueness(input.email, () =>
    insertUser(trx, { name: input.name, email: input.email, created_by: creator, now: nowTimestamp() }),
  );
  await recordEvent(trx, 'user.created', userPath(user.id), user);
  return user;
}

export function replaceUser(
  trx: Trx,
  id: number,
  input: UserReplace,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredUser> {
  return changeUser(trx, id, condition, sight, input, () => ({ name: input.name, email: input.email }));
}

/** JSON Merge Patch: members present replace stored values; absent members stay. */
export function patchUser(
  trx: Trx,
  id: number,
  patch: UserPatch,
  condition: VersionCondition,
  sight: Sight,
): Promise<StoredUser> {
  return changeUser(trx, id, condition, sight, patch, (stored) => ({
    name: patch.name ?? stored.name,
    email: patch.email ?? stored.email,
  }));
}

export async function deleteUser(trx: Trx, id: number, condition: VersionCondition, sight: Sight): Promise<void> {
  await withRowLocked(
    trx,
    { table: 'users', id },
    async () => {
      const stored = await getUser(trx, id, sight);
      assertCondition(condition, stored.version, `User ${id}`);
      if (await hasPlacedOrders(trx, id)) {
        throw new ConflictError(
          'user-has-open-orders',
          `User ${id} has placed orders; fulfil, cancel or delete them first.`,
        );
      }
      if (!(await deleteAtVersion(trx, 'users', id, stored.version))) return VERSION_MOVED;
      await recordEvents(trx, [
        { type: 'user.deleted', path: userPath(id), data: { id }, owner: ownerOf('users', stored) },
      ]);
      return DELETED;
    },
    `User ${id}`,
  );
}

async function changeUser(
  trx: Trx,
  id: number,
  condition: VersionCondition,
  sight: Sight,
  body: UserReplace | UserPatch,
  next: (stored: StoredUser) => { name: string; email: string },
): Promise<StoredUser> {
  return withRowLocked(
    trx,
    { table: 'users', id },
    async () => {
      const stored = await getUser(trx, id, sight);
      assertCondition(condition, stored.version, `User ${id}`);
      assertReadOnlyEchoes(stored, body, createdByDiffers(stored, body));
      const wanted = next(stored);
      // A write that changes nothing keeps the version, so ETags held by clients stay valid.
      if (wanted.name === stored.name && wanted.email === stored.email) return written(stored);
      const updated = await withEmailUniqueness(wanted.email, () =>
        updateUserAtVersion(trx, id, stored.version, { ...wanted, now: nowTimestamp() }),
      );
      if (!updated) return VERSION_MOVED;
      await recordEvent(trx, 'user.updated', userPath(id), updated);
      return written(updated);
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
