import type { Kysely } from 'kysely';

/** A caller's own rate limit (requests per minute); null: its role's default (docs/limits.md). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('callers').addColumn('rate_limit', 'integer').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('callers').dropColumn('rate_limit').execute();
}
