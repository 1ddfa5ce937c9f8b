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
 *
 * URLs are stored from now on as rowi calls them (the WHATWG serialisation); those stored before
 * are rewritten so, so that no listing shows a host other than the one called (a tab, CR or LF
 * inside a host is dropped by the parser).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('owner_caller_id', 'bigint').execute();
  await sql`update webhook_endpoints set owner_caller_id = (select min(id) from callers where role = 'admin')`.execute(
    db,
  );
  const { rows } = await sql<{ id: number; url: string }>`select id, url from webhook_endpoints`.execute(db);
  for (const { id, url } of rows) {
    const called = URL.canParse(url) ? new URL(url).href : url;
    if (called !== url) await sql`update webhook_endpoints set url = ${called} where id = ${id}`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('owner_caller_id').execute();
}
