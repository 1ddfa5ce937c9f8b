import { sql, type Kysely } from 'kysely';

/**
 * The caller a webhook endpoint acts for (its owner: the caller that created it). Deliveries go
 * out only for events of resources the owner may read when they are fanned out and when they are
 * sent (docs/events.md). No foreign key: when the owner is deleted the id stays, to say whose the
 * endpoint was, and caller ids are never handed out again (portable.ts addIdColumn).
 *
 * Endpoints made before owners existed are given the first admin caller (the lowest id), as the
 * one that could have made them; with no admin left they stay without one and nothing is sent to
 * them until a caller enables them again and becomes their owner.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('owner_caller_id', 'bigint').execute();
  await sql`update webhook_endpoints set owner_caller_id = (select min(id) from callers where role = 'admin')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('owner_caller_id').execute();
}
