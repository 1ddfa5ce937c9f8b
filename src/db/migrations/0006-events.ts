import { sql, type Kysely } from 'kysely';
import { isSqlite } from '../dialect.js';
import { addVersionColumns, createSortIndexes, textType, createIdTable, required } from './portable.js';

/**
 * The outbox of events and the webhooks that deliver them.
 *
 * `events` is written in the transaction of the change it tells of. Its rows are read in the
 * order (txid, seq): on SQLite txid is 0 and seq follows the single writer's commits; on
 * PostgreSQL txid is the writing transaction's id, and readers take only events of transactions
 * older than every one still running (outbox/outbox.repository.ts), so nothing that commits later
 * can appear behind a position a reader has passed. `id` is the public, time-sortable id.
 *
 * `event_cursors` keeps how far each consumer of the outbox (the webhook fan-out, the NATS
 * publisher) has read, with the lease of the one instance that runs it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = textType(db);
  const sqlite = isSqlite(db);
  await db.schema
    .createTable('events')
    .addColumn('seq', sqlite ? 'integer' : 'bigint', (column) =>
      sqlite ? column.primaryKey().autoIncrement() : column.primaryKey().generatedByDefaultAsIdentity(),
    )
    .addColumn('txid', 'bigint', (column) =>
      column.notNull().defaultTo(sqlite ? 0 : sql`(pg_current_xact_id()::text::bigint)`),
    )
    .$call(required(text, ['id', 'type']))
    // The resource whose read scope sees the event (orders → orders:read).
    .$call(required(text, ['resource', 'path']))
    // No created_at: the id begins with the event's time (outbox/event-ids.ts).
    .addColumn('data', text, (column) => column.notNull())
    .execute();
  // Two indexes only, since every change writes its events: the id (read by id, paged by id, and
  // ranges of time, as ids begin with their time) and the type (listing by type). On SQLite the
  // readers' order is seq, the table's own key; on PostgreSQL (txid, seq) needs one more.
  await db.schema.createIndex('events_id_unique').on('events').column('id').unique().execute();
  await createSortIndexes(db, 'events', ['type']);
  if (!sqlite) await db.schema.createIndex('events_txid_seq').on('events').columns(['txid', 'seq']).execute();

  await db.schema
    .createTable('event_cursors')
    .addColumn('name', text, (column) => column.primaryKey())
    .$call(required('bigint', ['txid', 'seq']))
    .addColumn('lease_owner', text)
    .addColumn('lease_until', text)
    .execute();

  await createIdTable(db, 'webhook_endpoints')
    .$call(required(text, ['url', 'description']))
    // JSON arrays: the event types wanted (["*"] for all), and the resources its creator could read.
    .$call(required(text, ['events', 'resources']))
    .addColumn('enabled', 'integer', (column) => column.notNull())
    .addColumn('disabled_reason', text)
    .addColumn('failures', 'integer', (column) => column.notNull().defaultTo(0))
    .addColumn('secret', text, (column) => column.notNull())
    .addColumn('previous_secret', text)
    .addColumn('previous_secret_expires_at', text)
    .$call((table) => addVersionColumns(db, table))
    .execute();
  await createSortIndexes(db, 'webhook_endpoints', ['created_at']);

  await createIdTable(db, 'webhook_deliveries')
    .addColumn('endpoint_id', 'bigint', (column) =>
      column.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .$call(required(text, ['event_id', 'event_type']))
    // pending (to be sent, now or at next_attempt_at), succeeded, dead (given up: the dead letter).
    .addColumn('status', text, (column) => column.notNull())
    .addColumn('attempts', 'integer', (column) => column.notNull().defaultTo(0))
    .addColumn('next_attempt_at', text)
    .addColumn('lease_until', text)
    .$call(required(text, ['created_at', 'updated_at']))
    .execute();
  await createSortIndexes(db, 'webhook_deliveries', ['endpoint_id']);
  await db.schema
    .createIndex('webhook_deliveries_status_endpoint_id')
    .on('webhook_deliveries')
    .columns(['status', 'endpoint_id', 'id'])
    .execute();
  await db.schema.createIndex('webhook_deliveries_created_at').on('webhook_deliveries').column('created_at').execute();

  await createIdTable(db, 'webhook_attempts')
    .addColumn('delivery_id', 'bigint', (column) =>
      column.notNull().references('webhook_deliveries.id').onDelete('cascade'),
    )
    .addColumn('attempted_at', text, (column) => column.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (column) => column.notNull())
    .addColumn('error', text)
    .execute();
  await createSortIndexes(db, 'webhook_attempts', ['delivery_id']);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_endpoints', 'event_cursors', 'events'])
    await db.schema.dropTable(table).execute();
}
