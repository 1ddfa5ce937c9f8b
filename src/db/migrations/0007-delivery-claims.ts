import type { Kysely } from 'kysely';
import { textType } from './portable.js';

/**
 * Who claimed a webhook delivery (the holder of the dispatcher's lease, outbox/lease.ts), so
 * that a process taking the lease over from one that died can give that one's claims back at
 * once instead of waiting for them to run out.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').addColumn('claimed_by', textType(db)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').dropColumn('claimed_by').execute();
}
