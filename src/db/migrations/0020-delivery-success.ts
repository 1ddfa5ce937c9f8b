import type { Kysely } from 'kysely';
import { textType } from './portable.js';

/**
 * A delivery that succeeds keeps its successful attempt in its own row (when, the status the
 * receiver answered, how long it took) instead of a row of webhook_attempts: a delivery sent once
 * and answered 2xx is then one row, written once, already succeeded (outbox/webhook-dispatcher.ts).
 * Failed attempts stay rows of webhook_attempts; deliveries that succeeded before this migration
 * keep their successful attempt there, with these columns null.
 *
 * The fan-out numbers a resource's deliveries after the highest sequence kept of it (no longer
 * counted in webhook_sequences at each fan-out, which pings still use): an index by endpoint,
 * resource and sequence finds it without reading the resource's rows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await db.schema.alterTable('webhook_deliveries').addColumn('succeeded_at', text).execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('success_status_code', 'integer').execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('success_duration_ms', 'integer').execute();
  await db.schema
    .createIndex('webhook_deliveries_sequence')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'resource_key', 'sequence'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_sequence').execute();
  await db.schema.alterTable('webhook_deliveries').dropColumn('success_duration_ms').execute();
  await db.schema.alterTable('webhook_deliveries').dropColumn('success_status_code').execute();
  await db.schema.alterTable('webhook_deliveries').dropColumn('succeeded_at').execute();
}
