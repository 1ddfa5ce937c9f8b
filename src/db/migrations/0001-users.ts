import type { Kysely } from 'kysely';
import { addVersionColumns, createSortIndexes, textType, createIdTable, required } from './portable.js';

export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await createIdTable(db, 'users')
    .$call(required(text, ['name', 'email', 'email_key']))
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await db.schema.createIndex('users_email_key_unique').on('users').column('email_key').unique().execute();
  await createSortIndexes(db, 'users', ['name', 'created_at', 'updated_at']);

  await db.schema
    .createTable('idempotency_keys')
    .$call(required(text, ['scope', 'key', 'fingerprint', 'response', 'created_at', 'expires_at']))
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_expires_at').on('idempotency_keys').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
  await db.schema.dropTable('users').execute();
}
