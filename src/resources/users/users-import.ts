import { setImmediate as turn } from 'node:timers/promises';
import { creatorOf, sightOf } from '../../auth/visibility.js';
import type { Trx } from '../../db/database.js';
import { recordEvents, type EventDraft } from '../../outbox/outbox.js';
import {
  inSlices,
  type ChunkOutcome,
  type ImportContext,
  type ImportTarget,
  type RowError,
  type RowWritten,
} from '../../engine/imports/target.js';
import {
  emailKey,
  findUsersByEmailKeys,
  insertUsers,
  updateUsersAtVersions,
  type StoredUser,
} from './users.repository.js';
import { UserCreateSchema, type UserCreate } from './users.schema.js';

/**
 * The users import (docs/bulk.md "Imports"): a row is a user's create body; a new email (compared
 * without regard to case) creates the user, one already stored follows on_conflict (update: the
 * name, and the email as written). A chunk is a few statements whatever its size, 128 rows each:
 * compiled reads of the emails and multi-row inserts of the users and of their events, and one
 * UPDATE … FROM (VALUES …) of the users to change.
 */
export const USERS_IMPORT: ImportTarget = {
  name: 'users',
  path: '/v1/users',
  resource: 'users',
  scopes: ['users:create', 'users:update'],
  example: { name: 'Ada Lovelace', email: 'ada@example.com' },
  columns: ['name', 'email'],
  required: ['name', 'email'],
  schema: UserCreateSchema,
  fromCsv: (cells) => ({ ...cells }),
  keyOf: (row: UserCreate) => emailKey(row.email),
  keyField: 'email',
  recordPath: (id) => `/v1/users/${id}`,
  write: (trx, rows, context) => writeUsers(trx, rows as unknown as { row: number; value: UserCreate }[], context),
};

async function writeUsers(
  trx: Trx,
  rows: readonly { row: number; value: UserCreate }[],
  context: ImportContext,
): Promise<ChunkOutcome> {
  const stored = new Map(
    (
      await findUsersByEmailKeys(
        trx,
        rows.map((row) => emailKey(row.value.email)),
        sightOf(context.access, 'users'),
      )
    ).map((user) => [user.email_key, user]),
  );
  const creator = creatorOf(context.access, 'users');
  const written: RowWritten[] = [];
  const errors: RowError[] = [];
  const events: EventDraft[] = [];
  const fresh: { row: number; value: UserCreate }[] = [];
  const changed: { row: number; value: UserCreate; user: StoredUser }[] = [];
  for (const row of rows) {
    const user = stored.get(emailKey(row.value.email));
    if (user === undefined) fresh.push(row);
    // A user the importer cannot see is one it would create, whose email is taken: as POST /v1/users answers.
    else if (!user.visible) errors.push(emailTaken(row.row, row.value.email));
    else if (context.onConflict === 'skip') written.push({ row: row.row, outcome: 'skipped' });
    else if (context.onConflict === 'error') errors.push(emailTaken(row.row, row.value.email));
    else if (user.name === row.value.name && user.email === row.value.email)
      written.push({ row: row.row, outcome: 'skipped', id: user.id });
    else changed.push({ row: row.row, value: row.value, user });
  }
  // One UPDATE a slice for the users to change, each at the version read.
  const updated = new Map(
    (
      await inSlices(trx, context, changed, (slice) =>
        updateUsersAtVersions(
          trx,
          slice.map(({ value, user }) => ({
            id: user.id,
            version: user.version,
            name: value.name,
            email: value.email,
          })),
          context.now,
        ),
      )
    ).map((user) => [user.id, user]),
  );
  for (const { row, user } of changed) {
    const stored = updated.get(user.id);
    if (stored === undefined) {
      errors.push({
        row,
        field: 'email',
        problem: 'precondition-failed',
        detail: `user ${user.id} changed while the import ran; retry`,
      });
      continue;
    }
    events.push({ type: 'user.updated', path: `/v1/users/${user.id}`, data: stored });
    written.push({ row, outcome: 'updated', id: user.id });
  }
  if (fresh.length > 0) {
    // A slice at a time, the event loop given a turn between: requests are read and answered meanwhile.
    const inserted = await inSlices(trx, context, fresh, (slice) =>
      insertUsers(
        trx,
        slice.map(({ value }) => ({ name: value.name, email: value.email, created_by: creator })),
        context.now,
      ),
    );
    await turn();
    const byKey = new Map(inserted.map((user) => [user.email_key, user]));
    for (const row of fresh) {
      const user = byKey.get(emailKey(row.value.email));
      if (user === undefined) {
        errors.push(emailTaken(row.row, row.value.email));
        continue;
      }
      const { email_key: _key, ...shown } = user;
      events.push({ type: 'user.created', path: `/v1/users/${user.id}`, data: shown });
      written.push({ row: row.row, outcome: 'created', id: user.id });
    }
  }
  await inSlices(trx, context, events, (slice) => recordEvents(trx, slice));
  return { written, errors };
}

const emailTaken = (row: number, email: string): RowError => ({
  row,
  field: 'email',
  problem: 'email-taken',
  detail: `another user already has the email ${emailKey(email)} (emails are compared without regard to case)`,
});
