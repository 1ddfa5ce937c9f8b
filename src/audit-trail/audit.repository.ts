import type { Insertable } from 'kysely';
import { compiledRowInserts, type RowsInto } from '../db/compiled.js';
import type { AuditEventsTable, Executor } from '../db/database.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';
import type { RetainedTable } from '../db/retention.js';

/** The audit trail's table (audit_events): batches written, pages read. */

/** The columns the trail writes, in the order of a batch's values. */
export const AUDIT_COLUMNS = [
  'at',
  'request_id',
  'caller_id',
  'caller_name',
  'credential',
  'user_id',
  'method',
  'path',
  'resource',
  'record_id',
  'action',
  'status',
  'duration_ms',
  'client_ip',
] as const satisfies readonly (keyof Insertable<AuditEventsTable>)[];

/** Rows per INSERT: well under SQLite's 32,766 and PostgreSQL's 65,535 bound parameters. */
const AUDIT_ROWS_PER_INSERT = 256;

/** The trail's rows (AUDIT_COLUMNS), their types on PostgreSQL. */
const AUDIT_INTO: RowsInto<'audit_events'> = {
  table: 'audit_events',
  columns: AUDIT_COLUMNS,
  types: [
    'text',
    'text',
    'bigint',
    'text',
    'text',
    'bigint',
    'text',
    'text',
    'text',
    'text',
    'text',
    'integer',
    'real',
    'text',
  ],
};
/**
 * Inserts compiled once per size (db/compiled.ts): under load thousands of events a second are
 * written, and building a 256-row insert every time would cost more than storing it; an import's
 * records share all but their path and record id, bound once a statement.
 */
const insertAuditRows = compiledRowInserts(AUDIT_ROWS_PER_INSERT, AUDIT_INTO);

/**
 * `values` are the rows' values, row by row, in AUDIT_COLUMNS order, written in statements of
 * 256, 128, … 1 rows: nine statement texts (a few more where rows share values) whatever the
 * batches' sizes, where any count up to 32 would be a text of its own (on PostgreSQL each is
 * prepared on every connection).
 */
export async function insertAuditEvents(trx: Executor, values: unknown[]): Promise<void> {
  const width = AUDIT_COLUMNS.length;
  const rows = values.length / width;
  for (let start = 0; start < rows;) {
    const size = Math.min(AUDIT_ROWS_PER_INSERT, 2 ** Math.floor(Math.log2(rows - start)));
    await insertAuditRows(trx, values.slice(start * width, (start + size) * width));
    start += size;
  }
}

export function findAuditEvents(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('audit_events').selectAll(), query);
}

/** Deletes at most `limit` of the events recorded before `cutoff`, the oldest first (in the index on at); how many. */
export async function deleteAuditEventsBefore(db: Executor, cutoff: string, limit: number): Promise<number> {
  const oldest = db.selectFrom('audit_events').select('id').where('at', '<', cutoff).orderBy('at').limit(limit);
  const result = await db.deleteFrom('audit_events').where('id', 'in', oldest).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The trail is kept for ROWI_AUDIT_RETENTION, then pruned in the background (db/retention.ts). */
export function auditTrailRetention(retentionSeconds: number): RetainedTable {
  return {
    table: 'audit_events',
    key: 'id',
    oldestBy: 'at',
    time: 'at',
    retentionSeconds,
    prune: deleteAuditEventsBefore,
  };
}
