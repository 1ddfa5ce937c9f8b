import type { Kysely } from 'kysely';

/**
 * Acting for a user, and events filtered by record (docs/access.md).
 *
 * The audit trail records, beside the caller (the actor), the user a request acted for (the
 * subject): `audit_events.user_id`, null for a request that acted for nobody.
 *
 * Each event records whose record it tells of, as the record said at the change: `created_by`
 * (its owner) and `user_id` (the user itself, or an order's user), so that a caller that sees
 * only its own records, or a token acting for a user, is listed, streamed and sent the events of
 * exactly the records it sees. Events written before have neither: callers that see every record
 * of their resource still see them, the others do not (events are pruned after
 * ROWI_EVENTS_RETENTION). No index: the events of a page are read in order and filtered as they
 * are read, and an index would cost every change's event write.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('audit_events').addColumn('user_id', 'bigint').execute();
  await db.schema.alterTable('events').addColumn('created_by', 'bigint').execute();
  await db.schema.alterTable('events').addColumn('user_id', 'bigint').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('events').dropColumn('user_id').execute();
  await db.schema.alterTable('events').dropColumn('created_by').execute();
  await db.schema.alterTable('audit_events').dropColumn('user_id').execute();
}
