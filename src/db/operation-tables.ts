import type { ColumnType, Generated, Selectable } from 'kysely';

/** Long-running operations and the errors of their rows (migration 0014), part of Database. */
export interface OperationTables {
  operations: OperationsTable;
  operation_errors: OperationErrorsTable;
}

export type OperationStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** A count PostgreSQL returns as text (bigint) and SQLite as a number. */
type Count = ColumnType<number, number | undefined, number>;

export interface OperationsTable {
  id: Generated<number>;
  /** What the operation does: `import`. */
  kind: string;
  /** The collection it writes: users, items, stock, orders. */
  target: string;
  status: OperationStatus;
  media_type: string;
  mode: 'atomic' | 'partial';
  on_conflict: 'error' | 'skip' | 'update';
  dry_run: number;
  /** The caller that started it (it and admins see it). */
  created_by: number | null;
  caller_name: string | null;
  /** The user the request that started it acted for (migration 0018); null: none. */
  user_id: number | null;
  /** The access of the request that started it, as JSON (auth/access.ts); null: stored before 0018. */
  access: string | null;
  request_id: string;
  /** The process that holds its uploaded file and runs it, and until when it is known alive. */
  holder: string | null;
  lease_until: string | null;
  cancel_requested: ColumnType<number, number | undefined, number>;
  bytes_total: number;
  bytes_read: Count;
  rows_read: Count;
  rows_succeeded: Count;
  rows_skipped: Count;
  rows_failed: Count;
  /** Every row up to this one (the file's row number) was committed, except those failed. */
  committed_through: Count;
  /** JSON: what the operation did, once it ended. */
  summary: string | null;
  version: number;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
}
export type OperationRow = Selectable<OperationsTable>;

export interface OperationErrorsTable {
  operation_id: number;
  /** The error's place among the operation's errors (its key with operation_id). */
  seq: number;
  /** The file's row: CSV counts the header as row 1, NDJSON counts lines. */
  row: number;
  field: string | null;
  /** The problem type's slug (validation-failed, sku-taken, malformed-row …). */
  problem: string;
  detail: string;
}
export type OperationErrorRow = Selectable<OperationErrorsTable>;
export type NewOperationError = OperationErrorRow;
