import type { Kysely } from 'kysely';
import { textType } from './portable.js';

/**
 * An operation runs with the access of the request that asked for it (docs/access.md "Every
 * path"), whichever process or thread runs it: `access` holds that access as JSON (its credential,
 * caller, scopes, the resources it sees only its own records of, and the user it acted for), and
 * `user_id` the user it acted for (null: none), so that a token acting for a user sees only the
 * operations started for that user. Operations stored before have neither: one still queued is
 * refused rather than run with rights it may not have had, and only callers that are not acting
 * for a user see them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('operations').addColumn('access', textType(db)).execute();
  await db.schema.alterTable('operations').addColumn('user_id', 'bigint').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('operations').dropColumn('user_id').execute();
  await db.schema.alterTable('operations').dropColumn('access').execute();
}
