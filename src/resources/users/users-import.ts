import { recordImport } from '../../engine/imports/record-import.js';
import { findUsersByEmailKeys, insertUsers, updateUsersAtVersions } from './users.repository.js';
import { USER } from './users.schema.js';
import { USERS } from './users.service.js';

/**
 * The users import (docs/bulk.md "Imports"): a row is a user's create body; a new email (compared
 * without regard to case) creates the user, one already stored follows on_conflict (update: the
 * name, and the email as written). Its chunks are written with the users' compiled multi-row
 * statements, 128 rows each: reads of the emails, inserts of the users, and one UPDATE … FROM
 * (VALUES …) of the users to change.
 */
export const USERS_IMPORT = recordImport(USERS, {
  scopes: ['users:create', 'users:update'],
  example: { name: 'Ada Lovelace', email: 'ada@example.com' },
  columns: ['name', 'email'],
  required: ['name', 'email'],
  schema: USER.create,
  bulk: { findByKeys: findUsersByEmailKeys, insert: insertUsers, updateAtVersions: updateUsersAtVersions },
});
