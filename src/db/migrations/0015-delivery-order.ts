import { sql, type Kysely } from 'kysely';
import { textType } from './portable.js';

/**
 * Webhook deliveries in order per resource (outbox/webhook-dispatcher.ts, docs/events.md): each delivery
 * names the resource its event is about (`resource_key`, the event's path, a stock's being its
 * item's) and carries its place among the deliveries of that resource to that endpoint
 * (`sequence`, 1, 2, 3… without gaps), counted in `webhook_sequences`. Deliveries made before
 * this migration get their resource from their event (when it is still kept) and no sequence.
 *
 * Two indexes: an endpoint's due deliveries in next_attempt_at order, over the pending ones only
 * (partial: the queries name `status = 'pending'` literally, deliveries.repository.ts), and the
 * pending deliveries of one resource before a given one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await db.schema.alterTable('webhook_deliveries').addColumn('resource_key', text).execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('sequence', 'bigint').execute();
  await sql`update webhook_deliveries set resource_key = coalesce(
      (select case when e.path like '%/stock' then substr(e.path, 1, length(e.path) - 6) else e.path end
       from events as e where e.id = webhook_deliveries.event_id),
      'event:' || event_id)`.execute(db);
  await db.schema
    .createIndex('webhook_deliveries_pending_due')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'next_attempt_at', 'id'])
    .where(sql.ref('status'), '=', sql.lit('pending'))
    .execute();
  // Not partial: SQLite prefers (status, endpoint_id, id) to a partial index here, which would read
  // every pending delivery of the endpoint; with the status among its columns this one wins.
  await db.schema
    .createIndex('webhook_deliveries_resource')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'resource_key', 'status', 'id'])
    .execute();
  await db.schema
    .createTable('webhook_sequences')
    .addColumn('endpoint_id', 'bigint', (column) =>
      column.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('resource_key', text, (column) => column.notNull())
    .addColumn('last', 'bigint', (column) => column.notNull())
    .addPrimaryKeyConstraint('webhook_sequences_pk', ['endpoint_id', 'resource_key'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('webhook_sequences').execute();
  await db.schema.dropIndex('webhook_deliveries_resource').execute();
  await db.schema.dropIndex('webhook_deliveries_pending_due').execute();
  await db.schema.alterTable('webhook_deliveries').dropColumn('sequence').execute();
  await db.schema.alterTable('webhook_deliveries').dropColumn('resource_key').execute();
}
