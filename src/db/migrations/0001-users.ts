import type { Kysely } from 'kysely';
import { addIdColumn, addVersionColumns, createSortIndexes, textType } from './portable.js';

export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await db.schema
    .createTable('users')
    .$call((table) => addIdColumn(db, table))
    .addColumn('name', text, (column) => column.notNull())
    .addColumn('email', text, (column) => column.notNull())
    .addColumn('email_key', text, (column) => column.notNull())
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await db.schema.createIndex('users_email_key_unique').on('users').column('email_key').unique().execute();
  await createSortIndexes(db, 'users', ['name', 'created_at', 'updated_at']);

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('scope', text, (column) => column.notNull())
    .addColumn('key', text, (column) => column.notNull())
    .addColumn('fingerprint', text, (column) => column.notNull())
    .addColumn('response', text, (column) => column.notNull())
    .addColumn('created_at', text, (column) => column.notNull())
    .addColumn('expires_at', text, (column) => column.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_expires_at').on('idempotency_keys').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
  await db.schema.dropTable('users').execute();
}
