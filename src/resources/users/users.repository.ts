import type { Executor, UserRow } from '../../db/database.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import { compiledVisibleById, whereVisible, type Sight } from '../../db/visibility.js';

/** The columns a user is read with: the API fields and the version its ETag comes from. */
const USER_COLUMNS = ['id', 'name', 'email', 'created_by', 'created_at', 'updated_at', 'version'] as const;
export type StoredUser = Pick<UserRow, (typeof USER_COLUMNS)[number]>;

const selectUserById = compiledVisibleById('users', (db, id: number) =>
  db.selectFrom('users').select(USER_COLUMNS).where('id', '=', id),
);

/** The user, when it exists and the sight shows it. */
export async function findUserById(db: Executor, id: number, sight: Sight): Promise<StoredUser | undefined> {
  const [user] = await selectUserById(db, id, sight);
  return user;
}

export function findUsers(db: Executor, query: ListQuery, sight: Sight) {
  return fetchPage(whereVisible(db.selectFrom('users').select(USER_COLUMNS), 'users', sight), query);
}

export function insertUser(
  db: Executor,
  user: { name: string; email: string; created_by: number | null; now: string },
): Promise<StoredUser> {
  return db
    .insertInto('users')
    .values({
      name: user.name,
      email: user.email,
      email_key: emailKey(user.email),
      created_by: user.created_by,
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

/** The users whose email keys are among these (an import's chunk). */
export function findUsersByEmailKeys(db: Executor, keys: string[]): Promise<(StoredUser & { email_key: string })[]> {
  if (keys.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('users')
    .select([...USER_COLUMNS, 'email_key'])
    .where('email_key', 'in', keys)
    .execute();
}

/** Inserts many users in one statement; an email taken meanwhile (a concurrent request) is left out. */
export function insertUsers(
  db: Executor,
  users: { name: string; email: string; created_by: number | null }[],
  now: string,
): Promise<(StoredUser & { email_key: string })[]> {
  if (users.length === 0) return Promise.resolve([]);
  return db
    .insertInto('users')
    .values(
      users.map((user) => ({ ...user, email_key: emailKey(user.email), version: 1, created_at: now, updated_at: now })),
    )
    .onConflict((conflict) => conflict.column('email_key').doNothing())
    .returning([...USER_COLUMNS, 'email_key'])
    .execute();
}
