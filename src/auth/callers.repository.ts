import { sql } from 'kysely';
import type { ApiKeyRow, CallerRow, Executor, Role, Trx } from '../db/database.js';
import { isSqlite } from '../db/dialect.js';
import { compiledQuery } from '../db/compiled.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';

/**
 * Callers and their API keys: every query of both, but the reads and writes of one caller and a page
 * of them, which the engine makes from these columns (resources/callers/callers.service.ts).
 */
export type StoredCaller = CallerRow;

export const CALLER_COLUMNS = [
  'id',
  'name',
  'role',
  'extra_scopes',
  'removed_scopes',
  'own_records',
  'rate_limit',
  'version',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof StoredCaller)[];

const KEY_COLUMNS = [
  'id',
  'caller_id',
  'prefix',
  'description',
  'created_at',
  'expires_at',
  'last_used_at',
  'revoked_at',
] as const;
export type StoredApiKey = Pick<ApiKeyRow, (typeof KEY_COLUMNS)[number]>;

const selectCallerById = compiledQuery((db, id: number) => db.selectFrom('callers').selectAll().where('id', '=', id));

export async function findCallerById(db: Executor, id: number): Promise<StoredCaller | undefined> {
  const [caller] = await selectCallerById(db, id);
  return caller;
}

export async function countCallers(db: Executor): Promise<number> {
  const { count } = await db
    .selectFrom('callers')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(count);
}

/**
 * Changes to callers and their keys take turns: a change that could leave nobody able to manage
 * callers (a demotion, removed scopes, a deletion, a revoked key) decides from every admin and
 * every admin's keys, and two such changes deciding side by side could each find "another caller
 * can still manage callers" and together leave none. On PostgreSQL a transaction-scoped advisory
 * lock serialises them (one lock, so no order of row locks to get wrong); SQLite's write
 * transaction already holds the only write lock from its start. Callers change rarely: nothing
 * waits for long.
 */
export async function lockCallerManagement(trx: Trx): Promise<void> {
  if (!isSqlite(trx)) await sql`select pg_advisory_xact_lock(hashtext('rowi.caller-management'))`.execute(trx);
}

/**
 * The admins, each with its removed scopes and how many working API keys it has (neither revoked
 * nor expired at `now`). Call it holding lockCallerManagement, so that what it finds stays true
 * until the transaction ends.
 */
export async function findAdmins(
  trx: Trx,
  now: string,
): Promise<{ id: number; removed_scopes: string; working_keys: number }[]> {
  const rows = await trx
    .selectFrom('callers')
    .select(['id', 'removed_scopes'])
    .where('role', '=', 'admin')
    .orderBy('id')
    .execute();
  if (rows.length === 0) return [];
  const keys = await trx
    .selectFrom('api_keys')
    .select(['caller_id', (eb) => eb.fn.countAll<number | string>().as('working')])
    .where(
      'caller_id',
      'in',
      rows.map((row) => row.id),
    )
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .groupBy('caller_id')
    .execute();
  const working = new Map(keys.map((row) => [row.caller_id, Number(row.working)]));
  return rows.map((row) => ({ ...row, working_keys: working.get(row.id) ?? 0 }));
}

export interface CallerFields {
  name: string;
  role: Role;
  extra_scopes: string;
  removed_scopes: string;
  own_records: string;
  rate_limit: number | null;
}

export function insertApiKey(
  db: Executor,
  key: {
    caller_id: number;
    prefix: string;
    secret_hash: string;
    description: string;
    expires_at: string | null;
    now: string;
  },
): Promise<StoredApiKey> {
  const { now, ...fields } = key;
  return db
    .insertInto('api_keys')
    .values({ ...fields, created_at: now })
    .returning(KEY_COLUMNS)
    .executeTakeFirstOrThrow();
}

export function findApiKeys(db: Executor, callerId: number, query: ListQuery) {
  return fetchPage(db.selectFrom('api_keys').select(KEY_COLUMNS).where('caller_id', '=', callerId), query);
}

export function findApiKey(db: Executor, callerId: number, keyId: number): Promise<StoredApiKey | undefined> {
  return db
    .selectFrom('api_keys')
    .select(KEY_COLUMNS)
    .where('caller_id', '=', callerId)
    .where('id', '=', keyId)
    .executeTakeFirst();
}

export async function revokeApiKey(db: Executor, keyId: number, now: string): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .execute();
}

/** What authenticating a key needs: the key's state and its caller, in one read. */
const selectKeyByPrefix = compiledQuery((db, prefix: string) =>
  db
    .selectFrom('api_keys')
    .innerJoin('callers', 'callers.id', 'api_keys.caller_id')
    .select([
      'api_keys.id as key_id',
      'api_keys.secret_hash',
      'api_keys.expires_at',
      'api_keys.revoked_at',
      'callers.id as caller_id',
      'callers.name',
      'callers.role',
      'callers.extra_scopes',
      'callers.removed_scopes',
      'callers.own_records',
      'callers.rate_limit',
    ])
    .where('api_keys.prefix', '=', prefix),
);

export async function findKeyForAuthentication(db: Executor, prefix: string) {
  const [row] = await selectKeyByPrefix(db, prefix);
  return row;
}

/** Records when keys were last used; one statement per key, batched by the caller. */
export async function touchApiKeys(db: Executor, lastUsed: Map<number, string>): Promise<void> {
  for (const [keyId, at] of lastUsed) {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: at })
      .where('id', '=', keyId)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
      .execute();
  }
}

/**
 * Makes instances that check for the first admin at once take turns until the transaction ends:
 * a transaction-scoped advisory lock on PostgreSQL; on SQLite the transaction's write lock already does.
 */
export async function takeFirstAdminTurn(trx: Executor): Promise<void> {
  if (!isSqlite(trx)) await sql`select pg_advisory_xact_lock(hashtext('rowi.first-admin'))`.execute(trx);
}
