import { generateApiKey } from '../../auth/api-keys.js';
import {
  countCallers,
  findApiKey,
  findApiKeys,
  insertApiKey,
  lockCallerManagement,
  revokeApiKey,
  takeFirstAdminTurn,
  type StoredApiKey,
} from '../../auth/callers.repository.js';
import { nowTimestamp, toTimestamp } from '../../db/clock.js';
import type { Db, Executor, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { NotFoundError, UnprocessableError } from '../../errors.js';
import { recordEvent } from '../../outbox/outbox.js';
import {
  assertManagementSurvives,
  callerPath,
  createCaller,
  findStoredCaller,
  type CallerView,
} from './callers.service.js';

/**
 * The API keys of callers (docs/security.md): made with a secret shown once, listed and read
 * without it, revoked (never deleted, so the audit trail can still name them); and, on an empty
 * database, the first admin caller with its key.
 */
export interface ApiKeyInput {
  description?: string;
  expires_at?: string;
}

/** A new key for the caller: the stored record, and the key itself, which is never shown again. */
export async function createApiKey(
  trx: Trx,
  callerId: number,
  input: ApiKeyInput = {},
): Promise<{ record: StoredApiKey; key: string }> {
  await findStoredCaller(trx, callerId);
  // The schema has checked that expires_at is an instant rowi stores.
  const expiresAt = input.expires_at === undefined ? null : toTimestamp(input.expires_at)!;
  if (expiresAt !== null && expiresAt <= nowTimestamp()) {
    throw new UnprocessableError('expires_at is in the past; a key must expire in the future (or never).', [
      { in: 'body', pointer: '#/expires_at', detail: 'must be in the future' },
    ]);
  }
  const generated = generateApiKey();
  const record = await insertApiKey(trx, {
    caller_id: callerId,
    prefix: generated.prefix,
    secret_hash: generated.secretHash,
    description: input.description ?? '',
    expires_at: expiresAt,
    now: nowTimestamp(),
  });
  await recordEvent(trx, 'api_key.created', keyPath(callerId, record.id), record);
  return { record, key: generated.key };
}

export async function listApiKeys(db: Executor, callerId: number, query: ListQuery) {
  await findStoredCaller(db, callerId);
  return findApiKeys(db, callerId, query);
}

export async function getApiKey(db: Executor, callerId: number, keyId: number): Promise<StoredApiKey> {
  await findStoredCaller(db, callerId);
  const key = await findApiKey(db, callerId, keyId);
  if (!key) throw new NotFoundError(`Caller ${callerId} has no API key ${keyId}.`);
  return key;
}

/** Revokes a key (it stays listed, with revoked_at); revoking a revoked key changes nothing. */
export async function revokeKey(trx: Trx, callerId: number, keyId: number): Promise<void> {
  await lockCallerManagement(trx);
  const key = await getApiKey(trx, callerId, keyId);
  const now = nowTimestamp();
  if (isWorking(key, now)) {
    await assertManagementSurvives(
      trx,
      { callerId, keysLost: 1 },
      () =>
        `Key ${keyId} is the last working API key of caller ${callerId}, the last caller that can manage callers; revoking it would leave nobody able to.`,
    );
  }
  if (key.revoked_at !== null) return;
  await revokeApiKey(trx, keyId, now);
  await recordEvent(trx, 'api_key.revoked', keyPath(callerId, keyId), { ...key, revoked_at: now });
}

const keyPath = (callerId: number, keyId: number) => `${callerPath(callerId)}/keys/${keyId}`;

function isWorking(key: StoredApiKey, now: string): boolean {
  return key.revoked_at === null && (key.expires_at === null || key.expires_at > now);
}

/**
 * On an empty database, the first admin caller and its key, so that someone can manage the
 * rest; undefined when callers exist. The key is returned once, to be shown once. Instances that
 * start at once on an empty PostgreSQL database take turns (a transaction-scoped advisory lock),
 * so exactly one creates the admin and the others find it; SQLite's write lock does the same.
 */
export async function ensureFirstAdmin(db: Db): Promise<{ caller: CallerView; key: string } | undefined> {
  return unitOfWork(db, async (trx) => {
    await takeFirstAdminTurn(trx);
    if ((await countCallers(trx)) > 0) return undefined;
    const caller = await createCaller(trx, { name: 'admin', role: 'admin' });
    const { key } = await createApiKey(trx, caller.id, {
      description: 'first admin key, created on an empty database',
    });
    return { caller, key };
  });
}
