import { sql, type Kysely } from 'kysely';
import { textType, createIdTable, required } from './portable.js';

/**
 * Long-running operations (docs/bulk.md "Imports"): an import of a file into users, items, stock
 * or orders, with its progress, its end and the errors of its rows.
 *
 * `holder` and `lease_until` tie a queued or running operation to the process that holds its
 * uploaded file: that process renews the lease while it lives; an operation whose lease has run
 * out is marked failed by any process (its holder was killed), saying which rows were committed
 * (`committed_through`: every row up to it was committed, except those listed as failed).
 * `status` with `holder` is what the claim of a job counts (the concurrency cap holds across
 * processes because it is counted here, not in memory).
 *
 * `operation_errors` holds every refused row of an operation (row, field, problem), in row
 * order; they go with their operation (ON DELETE CASCADE).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  await createIdTable(db, 'operations')
    .$call(required(text, ['kind', 'target']))
    .addColumn('status', text, (column) =>
      column.notNull().check(sql`status in ('queued', 'running', 'succeeded', 'failed', 'cancelled')`),
    )
    .addColumn('media_type', text, (column) => column.notNull())
    .addColumn('mode', text, (column) => column.notNull().check(sql`mode in ('atomic', 'partial')`))
    .addColumn('on_conflict', text, (column) => column.notNull().check(sql`on_conflict in ('error', 'skip', 'update')`))
    .addColumn('dry_run', 'integer', (column) => column.notNull())
    .addColumn('created_by', 'bigint')
    .addColumn('caller_name', text)
    .addColumn('request_id', text, (column) => column.notNull())
    .addColumn('holder', text)
    .addColumn('lease_until', text)
    .addColumn('cancel_requested', 'integer', (column) => column.notNull().defaultTo(0))
    .addColumn('bytes_total', 'bigint', (column) => column.notNull())
    .addColumn('bytes_read', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('rows_read', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('rows_succeeded', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('rows_skipped', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('rows_failed', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('committed_through', 'bigint', (column) => column.notNull().defaultTo(0))
    .addColumn('summary', text)
    .addColumn('version', 'integer', (column) => column.notNull())
    .$call(required(text, ['created_at', 'updated_at']))
    .addColumn('started_at', text)
    .addColumn('finished_at', text)
    .execute();
  // The caller's own operations in id order (keyset paging of a caller that sees only its own).
  await db.schema.createIndex('operations_created_by_id').on('operations').columns(['created_by', 'id']).execute();
  // The claim and the lease sweep look at the unfinished ones only.
  await db.schema.createIndex('operations_status_id').on('operations').columns(['status', 'id']).execute();
  await db.schema.createIndex('operations_finished_at').on('operations').column('finished_at').execute();

  await db.schema
    .createTable('operation_errors')
    .addColumn('operation_id', 'bigint', (column) => column.notNull().references('operations.id').onDelete('cascade'))
    .$call(required('bigint', ['seq', 'row']))
    .addColumn('field', text)
    .$call(required(text, ['problem', 'detail']))
    .addPrimaryKeyConstraint('operation_errors_key', ['operation_id', 'seq'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('operation_errors').execute();
  await db.schema.dropTable('operations').execute();
}
