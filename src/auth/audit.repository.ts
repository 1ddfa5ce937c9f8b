import type { CompiledQuery, Insertable } from 'kysely';
import type { AuditEventsTable, Executor } from '../db/database.js';
import { fetchPage, type ListQuery } from '../db/paginate.js';

/** The audit trail's table (audit_events): batches written, pages read. */

/** The columns the trail writes, in the order of a batch's values. */
export const AUDIT_COLUMNS = [
  'at', 'request_id', 'caller_id', 'caller_name', 'credential', 'method', 'path',
  'resource', 'record_id', 'action', 'status', 'duration_ms', 'client_ip',
] as const satisfies readonly (keyof Insertable<AuditEventsTable>)[];

/**
 * Multi-row inserts of 256, 128, … 1 rows, each built and compiled by Kysely once per dialect:
 * under load thousands of events a second are written, and building a 256-row insert every
 * time would cost more than storing it. The SQL does not depend on the values; the parameters
 * are the rows' values, row by row, in AUDIT_COLUMNS order.
 */
const compiledInserts = new WeakMap<object, Map<number, CompiledQuery>>();

function insertOf(db: Executor, size: number): CompiledQuery {
  const { adapter } = db.getExecutor();
  let bySize = compiledInserts.get(adapter);
  if (bySize === undefined) compiledInserts.set(adapter, (bySize = new Map()));
  let compiled = bySize.get(size);
  if (compiled === undefined) {
    const row = Object.fromEntries(AUDIT_COLUMNS.map((column) => [column, null])) as unknown as Insertable<AuditEventsTable>;
    compiled = db.insertInto('audit_events').values(Array.from({ length: size }, () => row)).compile();
    bySize.set(size, compiled);
  }
  return compiled;
}

/** Inserts `size` events (a power of two up to 256) whose values follow one another in AUDIT_COLUMNS order. */
export async function insertAuditEvents(trx: Executor, size: number, values: unknown[]): Promise<void> {
  await trx.executeQuery({ ...insertOf(trx, size), parameters: values });
}

export function findAuditEvents(db: Executor, query: ListQuery) {
  return fetchPage(db.selectFrom('audit_events').selectAll(), query);
}
