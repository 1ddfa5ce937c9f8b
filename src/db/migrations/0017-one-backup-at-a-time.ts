import { sql, type Kysely } from 'kysely';

/**
 * Backups started over HTTP are operations (`kind = 'backup'`, docs/operations.md "Backups and
 * restore"). At most one is queued or running at a time, in the whole deployment: a partial unique
 * index over the unfinished backups makes a second insert fail whichever process (worker, instance)
 * tries it, so the refusal does not depend on what one process has in memory.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('operations_one_backup')
    .on('operations')
    .column('kind')
    .unique()
    .where(sql<boolean>`kind = 'backup' and status in ('queued', 'running')`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('operations_one_backup').execute();
}
