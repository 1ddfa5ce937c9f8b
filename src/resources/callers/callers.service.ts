import { sql } from 'kysely';
import { generateApiKey } from '../../auth/api-keys.js';
import { isGrantable, parseScopeList, scopesOf, ALL_SCOPES, type Scope } from '../../auth/policy.js';
import { nowTimestamp, toTimestamp } from '../../db/clock.js';
import type { Db, Executor, Role, Trx } from '../../db/database.js';
import { isSqlite } from '../../db/dialect.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { ListQuery } from '../../db/paginate.js';
import { deleteAtVersion } from '../../db/versioned.js';
import { ConflictError, NotFoundError, UnprocessableError, type FieldError } from '../../errors.js';
import { assertCondition, assertReadOnlyEchoes, withVersionRetry, type VersionCondition } from '../versioned.js';
import {
  countAdminsLocked,
  countCallers,
  findApiKey,
  findApiKeys,
  findCallerById,
  findCallers,
  insertApiKey,
  insertCaller,
  revokeApiKey,
  updateCallerAtVersion,
  type StoredApiKey,
  type StoredCaller,
} from './callers.repository.js';

/** A caller as the API shows it: grants as arrays, and the scopes they add up to. */
export interface CallerView {
  id: number;
  name: string;
  role: Role;
  extra_scopes: string[];
  removed_scopes: string[];
  scopes: string[];
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
  version: number;
}

export interface CallerInput {
  name: string;
  role: Role;
  extra_scopes?: string[];
  removed_scopes?: string[];
  rate_limit?: number | null;
}

export type CallerPatch = Partial<CallerInput> & { id?: number; created_at?: string; updated_at?: string; scopes?: string[] };

export function viewOf(caller: StoredCaller): CallerView {
  const extra = parseScopeList(caller.extra_scopes);
  const removed = parseScopeList(caller.removed_scopes);
  const held = scopesOf(caller.role, extra, removed);
  return {
    id: caller.id,
    name: caller.name,
    role: caller.role,
    extra_scopes: extra,
    removed_scopes: removed,
    scopes: ALL_SCOPES.filter((scope) => held.has(scope)),
    rate_limit: caller.rate_limit,
    created_at: caller.created_at,
    updated_at: caller.updated_at,
    version: caller.version,
  };
}

export async function getCaller(db: Executor, id: number): Promise<CallerView> {
  return viewOf(await findStoredCaller(db, id));
}

export async function listCallers(db: Executor, query: ListQuery) {
  const page = await findCallers(db, query);
  return { rows: page.rows.map(viewOf), nextAfter: page.nextAfter };
}

export async function createCaller(trx: Trx, input: CallerInput): Promise<CallerView> {
  const fields = checkedFields(input);
  return viewOf(await withNameUniqueness(fields.name, () => insertCaller(trx, { ...fields, now: nowTimestamp() })));
}

/** JSON Merge Patch of name, role and grants; the last admin cannot stop being one. */
export async function patchCaller(trx: Trx, id: number, patch: CallerPatch, condition: VersionCondition): Promise<CallerView> {
  return withVersionRetry(async () => {
    const stored = await findStoredCaller(trx, id);
    assertCondition(condition, stored.version, `Caller ${id}`);
    assertReadOnlyEchoes(stored, patch);
    const current = viewOf(stored);
    const fields = checkedFields({
      name: patch.name ?? current.name,
      role: patch.role ?? current.role,
      extra_scopes: patch.extra_scopes ?? current.extra_scopes,
      removed_scopes: patch.removed_scopes ?? current.removed_scopes,
      // Merge patch: null sets the role's default back, absent keeps what is stored.
      rate_limit: patch.rate_limit === undefined ? current.rate_limit : patch.rate_limit,
    });
    if (stored.role === 'admin' && fields.role !== 'admin') await assertAnotherAdmin(trx, id);
    const unchanged = (Object.keys(fields) as (keyof typeof fields)[]).every((field) => fields[field] === stored[field]);
    if (unchanged) return current;
    const updated = await withNameUniqueness(fields.name, () => updateCallerAtVersion(trx, id, stored.version, { ...fields, now: nowTimestamp() }));
    return updated && viewOf(updated);
  }, `Caller ${id}`);
}

/** Deleting a caller deletes its keys; its audit events stay, naming it. */
export async function deleteCaller(trx: Trx, id: number, condition: VersionCondition): Promise<void> {
  await withVersionRetry(async () => {
    const stored = await findStoredCaller(trx, id);
    assertCondition(condition, stored.version, `Caller ${id}`);
    if (stored.role === 'admin') await assertAnotherAdmin(trx, id);
    return (await deleteAtVersion(trx, 'callers', id, stored.version)) ? true : undefined;
  }, `Caller ${id}`);
}

export interface ApiKeyInput {
  description?: string;
  expires_at?: string;
}

/** A new key for the caller: the stored record, and the key itself, which is never shown again. */
export async function createApiKey(trx: Trx, callerId: number, input: ApiKeyInput = {}): Promise<{ record: StoredApiKey; key: string }> {
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
  await getApiKey(trx, callerId, keyId);
  await revokeApiKey(trx, keyId, nowTimestamp());
}

/**
 * On an empty database, the first admin caller and its key, so that someone can manage the
 * rest; undefined when callers exist. The key is returned once, to be shown once. Instances that
 * start at once on an empty PostgreSQL database take turns (a transaction-scoped advisory lock),
 * so exactly one creates the admin and the others find it; SQLite's write lock does the same.
 */
export async function ensureFirstAdmin(db: Db): Promise<{ caller: CallerView; key: string } | undefined> {
  return db.transaction().execute(async (trx) => {
    if (!isSqlite(trx)) await sql`select pg_advisory_xact_lock(hashtext('rowi.first-admin'))`.execute(trx);
    if ((await countCallers(trx)) > 0) return undefined;
    const caller = await createCaller(trx, { name: 'admin', role: 'admin' });
    const { key } = await createApiKey(trx, caller.id, { description: 'first admin key, created on an empty database' });
    return { caller, key };
  });
}

async function findStoredCaller(db: Executor, id: number): Promise<StoredCaller> {
  const caller = await findCallerById(db, id);
  if (!caller) throw new NotFoundError(`There is no caller ${id}.`);
  return caller;
}

function checkedFields(input: CallerInput): { name: string; role: Role; extra_scopes: string; removed_scopes: string; rate_limit: number | null } {
  const extra = [...new Set(input.extra_scopes ?? [])];
  const removed = [...new Set(input.removed_scopes ?? [])];
  const errors: FieldError[] = extra
    .map((scope, index) => ({ scope, index }))
    .filter(({ scope }) => !isGrantable(scope as Scope))
    .map(({ index }) => ({ in: 'body', pointer: `#/extra_scopes/${index}`, detail: 'caller management comes only with the admin role' }));
  if (errors.length > 0) throw new UnprocessableError('Caller management scopes cannot be granted; give the caller the admin role instead.', errors);
  return { name: input.name, role: input.role, extra_scopes: extra.join(' '), removed_scopes: removed.join(' '), rate_limit: input.rate_limit ?? null };
}

async function assertAnotherAdmin(trx: Trx, id: number): Promise<void> {
  if ((await countAdminsLocked(trx)) <= 1) {
    throw new ConflictError('last-admin', `Caller ${id} is the last admin; make another caller an admin first.`);
  }
}

async function withNameUniqueness<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error, 'callers.name')) {
      throw new ConflictError('caller-name-taken', `Another caller is already named ${name}.`, { conflicting_field: 'name' });
    }
    throw error;
  }
}
