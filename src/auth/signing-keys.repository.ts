import { sql } from 'kysely';
import type { Executor, SigningKeyRow } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';

/** The keys that sign and verify rowi's tokens (signing_keys). */

export function findSigningKeys(db: Executor): Promise<SigningKeyRow[]> {
  return db.selectFrom('signing_keys').selectAll().execute();
}

export async function insertSigningKey(db: Executor, key: SigningKeyRow): Promise<void> {
  await db.insertInto('signing_keys').values(key).execute();
}

/** Retires every key that signs now (a rotation: the next token is signed with a new one). */
export async function retireSigningKeys(db: Executor, now: string): Promise<void> {
  await db.updateTable('signing_keys').set({ retired_at: now }).where('retired_at', 'is', null).execute();
}

export async function hasActiveSigningKey(trx: Executor): Promise<boolean> {
  return (
    (await trx.selectFrom('signing_keys').select('kid').where('retired_at', 'is', null).limit(1).executeTakeFirst()) !==
    undefined
  );
}

/**
 * Makes instances that check for a signing key at once take turns until the transaction ends: an
 * advisory lock on PostgreSQL; on SQLite the transaction's write lock already does.
 */
export async function takeSigningKeyTurn(trx: Executor): Promise<void> {
  if (!isSqlite(trx)) await sql`select pg_advisory_xact_lock(hashtext('rowi.signing-key'))`.execute(trx);
}
