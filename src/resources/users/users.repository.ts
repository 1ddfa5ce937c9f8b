import type { Executor, UserRow } from '../../db/database.js';
import { compiledQuery } from '../../db/compiled.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';

/** The columns a user is read with: the API fields and the version its ETag comes from. */
const USER_COLUMNS = ['id', 'name', 'email', 'created_at', 'updated_at', 'version'] as const;
export type StoredUser = Pick<UserRow, (typeof USER_COLUMNS)[number]>;

const selectUserById = compiledQuery((db, id: number) =>
  db.selectFrom('users').select(USER_COLUMNS).where('id', '=', id),
);

export async function findUserById(db: Executor, id: number): Promise<StoredUser | undefined> {
  const [user] = await selectUserById(db, id);
  return user;
}

export function findUsers(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('users').select(USER_COLUMNS), query);
}

export function insertUser(db: Executor, user: { name: string; email: string; now: string }): Promise<StoredUser> {
  return db
    .insertInto('users')
    .values({
      name: user.name,
      email: user.email,
      email_key: emailKey(user.email),
      version: 1,
      created_at: user.now,
      updated_at: user.now,
    })
    .returning(USER_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** Writes new field values if the row is still at `version`; undefined when it is not. */
export function updateUserAtVersion(
  db: Executor,
  id: number,
  version: number,
  changes: { name: string; email: string; now: string },
): Promise<StoredUser | undefined> {
  return db
    .updateTable('users')
    .set({
      name: changes.name,
      email: changes.email,
      email_key: emailKey(changes.email),
      version: version + 1,
      updated_at: changes.now,
    })
    .where('id', '=', id)
    .where('version', '=', version)
    .returning(USER_COLUMNS)
    .executeTakeFirst();
}

/** Emails are unique without regard to case: the key is the Unicode lower case of the address. */
export function emailKey(email: string): string {
  return email.toLowerCase();
}
