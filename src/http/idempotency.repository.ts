import type { Executor } from '../db/database.js';

/** The responses kept for Idempotency-Key (idempotency_keys), by scope (caller and route) and key. */

export function findIdempotencyKey(
  trx: Executor,
  scope: string,
  key: string,
): Promise<{ fingerprint: string; response: string; expires_at: string } | undefined> {
  return trx
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'response', 'expires_at'])
    .where('scope', '=', scope)
    .where('key', '=', key)
    .executeTakeFirst();
}

/** Claims the key: a concurrent claim of the same one waits for this transaction, then fails on the unique key. */
export async function insertIdempotencyKey(
  trx: Executor,
  claim: { scope: string; key: string; fingerprint: string; now: string; expiresAt: string },
): Promise<void> {
  await trx
    .insertInto('idempotency_keys')
    .values({
      scope: claim.scope,
      key: claim.key,
      fingerprint: claim.fingerprint,
      response: '',
      created_at: claim.now,
      expires_at: claim.expiresAt,
    })
    .execute();
}

export async function storeIdempotentResponse(
  trx: Executor,
  scope: string,
  key: string,
  response: string,
): Promise<void> {
  await trx
    .updateTable('idempotency_keys')
    .set({ response })
    .where('scope', '=', scope)
    .where('key', '=', key)
    .execute();
}

export async function deleteIdempotencyKey(trx: Executor, scope: string, key: string): Promise<void> {
  await trx.deleteFrom('idempotency_keys').where('scope', '=', scope).where('key', '=', key).execute();
}

/** Deletes at most `limit` of the keys past their lifetime at `now`, the longest expired first; how many. */
export async function deleteIdempotencyKeysExpiredBy(db: Executor, now: string, limit: number): Promise<number> {
  const expired = db
    .selectFrom('idempotency_keys')
    .select(['scope', 'key'])
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit);
  const result = await db
    .deleteFrom('idempotency_keys')
    .where(({ eb, refTuple }) => eb(refTuple('scope', 'key'), 'in', expired.$asTuple('scope', 'key')))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
