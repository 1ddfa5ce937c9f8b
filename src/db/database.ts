import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction } from 'kysely';

/**
 * Every table rowi stores, as Kysely sees it. Column names equal API field names (snake_case),
 * so there is no mapping layer. Timestamps are RFC 3339 UTC strings with milliseconds, written
 * by the application (never by the database), so that both backends store and compare them
 * identically.
 */
export interface Database {
  users: UsersTable;
  idempotency_keys: IdempotencyKeysTable;
}

export interface UsersTable {
  id: Generated<number>;
  name: string;
  email: string;
  /** The email folded to lower case: the unique key that makes email case-insensitive. */
  email_key: string;
  /** Incremented on every change; the ETag is derived from it. */
  version: number;
  created_at: string;
  updated_at: string;
}
export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;

export interface IdempotencyKeysTable {
  /** Whose key this is: keys are per caller, so two callers may use the same key. */
  scope: string;
  key: string;
  /** Hash of method, target and body of the first request that used the key. */
  fingerprint: string;
  /** The first response, as JSON (status, body and the headers needed to replay it). */
  response: string;
  created_at: string;
  expires_at: ColumnType<string, string, never>;
}

/** The database or an open transaction: services that write take either. */
export type Db = Kysely<Database>;
export type Trx = Transaction<Database>;
export type Executor = Db | Trx;
