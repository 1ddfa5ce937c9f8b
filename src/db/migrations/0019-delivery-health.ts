import type { Kysely } from 'kysely';

/**
 * The health of a webhook endpoint (GET /v1/webhook-endpoints/{id}/health) counts what happened to
 * its deliveries in the last day: an index of each endpoint's deliveries by status and by when they
 * last changed (a delivery's updated_at moves with each attempt, a success, going dead, a retry by
 * hand). With it those counts, and the attempts of the deliveries changed in the window, read only
 * that day's deliveries of the endpoint, not every delivery kept (ROWI_EVENTS_RETENTION).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('webhook_deliveries_endpoint_status_updated')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'status', 'updated_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_endpoint_status_updated').execute();
}
