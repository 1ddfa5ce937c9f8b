import { sql, type Kysely } from 'kysely';
import { addVersionColumns, createSortIndexes, textType, createIdTable, required } from './portable.js';

/**
 * Callers (the systems that use the API), their API keys, the keys that sign rowi's own access
 * tokens, and the audit trail.
 *
 * API keys are stored only as a SHA-256 hash of the whole key: a key is 256 random bits, so a
 * slow password hash would add cost without adding safety. The public part (`prefix`) finds the
 * row; the hash is then compared in constant time.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await createIdTable(db, 'callers')
    .addColumn('name', text, (column) => column.notNull())
    .addColumn('role', text, (column) => column.notNull().check(sql`role in ('reader', 'editor', 'admin')`))
    // Space-separated scopes added to and removed from the role's.
    .addColumn('extra_scopes', text, (column) => column.notNull().defaultTo(''))
    .addColumn('removed_scopes', text, (column) => column.notNull().defaultTo(''))
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await db.schema.createIndex('callers_name_unique').on('callers').column('name').unique().execute();
  await createSortIndexes(db, 'callers', ['created_at']);

  await createIdTable(db, 'api_keys')
    .addColumn('caller_id', 'bigint', (column) => column.notNull().references('callers.id').onDelete('cascade'))
    .$call(required(text, ['prefix', 'secret_hash']))
    .addColumn('description', text, (column) => column.notNull().defaultTo(''))
    .addColumn('created_at', text, (column) => column.notNull())
    .addColumn('expires_at', text)
    .addColumn('last_used_at', text)
    .addColumn('revoked_at', text)
    .execute();
  await db.schema.createIndex('api_keys_prefix_unique').on('api_keys').column('prefix').unique().execute();
  await createSortIndexes(db, 'api_keys', ['caller_id']);

  await db.schema
    .createTable('signing_keys')
    .addColumn('kid', text, (column) => column.primaryKey())
    .$call(required(text, ['algorithm', 'private_jwk', 'public_jwk', 'created_at']))
    // Set when a newer key takes over signing; the public key stays published until the
    // tokens it signed have expired.
    .addColumn('retired_at', text)
    .execute();

  await createIdTable(db, 'audit_events')
    .$call(required(text, ['at', 'request_id']))
    .addColumn('caller_id', 'bigint')
    .addColumn('caller_name', text)
    .addColumn('credential', text)
    .$call(required(text, ['method', 'path']))
    .addColumn('resource', text)
    .addColumn('record_id', text)
    .addColumn('action', text)
    .addColumn('status', 'integer', (column) => column.notNull())
    .addColumn('duration_ms', 'real', (column) => column.notNull())
    .addColumn('client_ip', text)
    .execute();
  // Admins read the trail newest first, usually narrowed to one caller or a time range.
  await createSortIndexes(db, 'audit_events', ['caller_id', 'at']);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('audit_events').execute();
  await db.schema.dropTable('signing_keys').execute();
  await db.schema.dropTable('api_keys').execute();
  await db.schema.dropTable('callers').execute();
}
