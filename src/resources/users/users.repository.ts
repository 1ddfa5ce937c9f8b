import { sql } from 'kysely';
import { BULK_ROWS_PER_INSERT, compiledKeyLists, compiledRowInserts } from '../../db/compiled.js';
import type { Executor, UserRow } from '../../db/database.js';
import { eitherParameters, visibleInEither, type Sight } from '../../db/visibility.js';

/** The columns a user is read with: the API fields and the version its ETag comes from. */
export const USER_COLUMNS = ['id', 'name', 'email', 'created_by', 'created_at', 'updated_at', 'version'] as const;
export type StoredUser = Pick<UserRow, (typeof USER_COLUMNS)[number]>;

/**
 * The name and email of many users at once (an import's on_conflict=update, where the new email has
 * the stored one's key, so no two rows can collide), each only while it is at the version read: one
 * UPDATE … FROM (VALUES …) for them all; the users it changed come back (one missing changed
 * meanwhile). The VALUES columns are column1 … column5 on both databases (the email key made here, as
 * emailKey makes it: SQLite's lower() knows ASCII only); the first row's casts type them for PostgreSQL.
 */
export async function updateUsersAtVersions(
  db: Executor,
  changes: readonly { id: number; version: number; name: string; email: string }[],
  now: string,
): Promise<StoredUser[]> {
  if (changes.length === 0) return [];
  const rows = changes.map((change, index) =>
    index === 0
      ? sql`(cast(${change.id} as bigint), cast(${change.version} as integer), cast(${change.name} as text), cast(${change.email} as text), cast(${emailKey(change.email)} as text))`
      : sql`(${change.id}, ${change.version}, ${change.name}, ${change.email}, ${emailKey(change.email)})`,
  );
  const { rows: updated } = await sql<StoredUser>`update users
    set name = changed.column3, email = changed.column4, email_key = changed.column5,
      version = users.version + 1, updated_at = ${now}
    from (values ${sql.join(rows)}) as changed
    where users.id = changed.column1 and users.version = changed.column2
    returning ${sql.join(USER_COLUMNS.map((column) => sql.ref(`users.${column}`)))}`.execute(db);
  return updated;
}

/** Emails are unique without regard to case: the key is the Unicode lower case of the address. */
export function emailKey(email: string): string {
  return email.toLowerCase();
}

/**
 * The users whose email keys are among these (an import's chunk), each with whether the sight shows
 * it: an email is taken whoever's user has it (emails are unique), but only a user the sight shows
 * may be changed or skipped as the importer's own.
 */
export async function findUsersByEmailKeys(
  db: Executor,
  keys: string[],
  sight: Sight,
): Promise<(StoredUser & { email_key: string; visible: boolean })[]> {
  const rows = await selectUsersByEmailKeys(db, keys, ...eitherParameters('users', sight));
  return rows.map(({ visible, ...user }) => ({ ...user, visible: Number(visible) === 1 }));
}

const selectUsersByEmailKeys = compiledKeyLists(
  BULK_ROWS_PER_INSERT,
  (db, keys, owner: number | null, user: number | null) =>
    db
      .selectFrom('users')
      .select([...USER_COLUMNS, 'email_key'])
      .select(sql<number>`case when ${visibleInEither('users', 'users', owner, user)} then 1 else 0 end`.as('visible'))
      .where('email_key', 'in', keys as string[]),
);

/** Inserts many users, compiled multi-row statements; an email taken meanwhile (a concurrent request) is left out. */
export function insertUsers(
  db: Executor,
  users: { name: string; email: string; created_by: number | null }[],
  now: string,
): Promise<(StoredUser & { email_key: string })[]> {
  return insertUserRows(
    db,
    users.flatMap((user) => [user.name, user.email, emailKey(user.email), user.created_by, 1, now, now]),
  );
}

const NEW_USER_FIELDS = ['name', 'email', 'email_key', 'created_by', 'version', 'created_at', 'updated_at'] as const;
const insertUserRows = compiledRowInserts(
  BULK_ROWS_PER_INSERT,
  { table: 'users', columns: NEW_USER_FIELDS, types: ['text', 'text', 'text', 'bigint', 'integer', 'text', 'text'] },
  (insert) =>
    insert.onConflict((conflict) => conflict.column('email_key').doNothing()).returning([...USER_COLUMNS, 'email_key']),
);
