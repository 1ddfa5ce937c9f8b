import { sql } from 'kysely';
import type { Executor, Trx } from '../../db/database.js';
import { isSqlite } from '../../db/dialect.js';
import { fetchPage, type ListQuery } from '../../db/keyset.js';
import type { NewOperationError, OperationErrorRow, OperationRow } from '../../db/operation-tables.js';
import { storableOrNull, storableText } from '../../db/storable-text.js';
import { whereVisible, type Sight } from '../../db/visibility.js';

/** Every query of long-running operations and the errors of their rows. */
export type StoredOperation = OperationRow;
export type StoredOperationError = OperationErrorRow;

/** Counts come back from PostgreSQL's bigint as text: every one is turned into a number here. */
const COUNTS = [
  'bytes_total',
  'bytes_read',
  'rows_read',
  'rows_succeeded',
  'rows_skipped',
  'rows_failed',
  'committed_through',
  'created_by',
  'id',
] as const;

function numeric(row: OperationRow): StoredOperation {
  const copy = { ...row } as Record<string, unknown>;
  for (const column of COUNTS) if (copy[column] !== null) copy[column] = Number(copy[column]);
  return copy as unknown as StoredOperation;
}

export async function insertOperation(
  db: Executor,
  operation: Omit<
    OperationRow,
    | 'id'
    | 'bytes_read'
    | 'rows_read'
    | 'rows_succeeded'
    | 'rows_skipped'
    | 'rows_failed'
    | 'committed_through'
    | 'cancel_requested'
  >,
): Promise<StoredOperation> {
  return numeric(await db.insertInto('operations').values(operation).returningAll().executeTakeFirstOrThrow());
}

export async function findOperationById(db: Executor, id: number, sight: Sight): Promise<StoredOperation | undefined> {
  const row = await whereVisible(
    db.selectFrom('operations').selectAll().where('id', '=', id),
    'operations',
    sight,
  ).executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

export async function findOperations(db: Executor, query: ListQuery, sight: Sight) {
  const page = await fetchPage(whereVisible(db.selectFrom('operations').selectAll(), 'operations', sight), query);
  return { ...page, rows: page.rows.map(numeric) };
}

/**
 * Takes the turn of claiming jobs: the counts and the claim of one transaction are not
 * interleaved with another process's (PostgreSQL: an advisory lock held to the commit; SQLite: the
 * transaction's write lock), so the concurrency cap holds across workers and instances.
 */
export async function lockClaims(trx: Trx): Promise<void> {
  if (!isSqlite(trx)) await sql`select pg_advisory_xact_lock(hashtext('rowi.import-claim'))`.execute(trx);
}

/** The oldest queued imports whose files `holder` holds. */
export async function findQueued(trx: Trx, holder: string, limit: number) {
  const rows = await trx
    .selectFrom('operations')
    .select(['id', 'created_by'])
    .where('status', '=', 'queued')
    .where('kind', '=', 'import')
    .where('holder', '=', holder)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    id: Number(row.id),
    created_by: row.created_by === null ? null : Number(row.created_by),
  }));
}

/** Moves a queued operation to running; undefined when it is no longer queued (cancelled meanwhile). */
export async function markRunning(trx: Trx, id: number, now: string): Promise<StoredOperation | undefined> {
  const row = await trx
    .updateTable('operations')
    .set((eb) => ({ status: 'running', started_at: now, updated_at: now, version: eb('version', '+', eb.lit(1)) }))
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

/** Keeps the operations `holder` holds alive until `until`. */
export async function renewLeases(db: Executor, holder: string, until: string): Promise<void> {
  await db
    .updateTable('operations')
    .set({ lease_until: until })
    .where('holder', '=', holder)
    .where('status', 'in', ['queued', 'running'])
    .execute();
}

/** Unfinished operations whose holder stopped renewing their lease before `now` (it was killed). */
export async function findAbandoned(db: Executor, now: string, limit: number): Promise<StoredOperation[]> {
  const rows = await db
    .selectFrom('operations')
    .selectAll()
    .where('status', 'in', ['queued', 'running'])
    .where('lease_until', '<', now)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(numeric);
}

export interface ProgressChange {
  bytes_read?: number;
  rows_read?: number;
  rows_succeeded?: number;
  rows_skipped?: number;
  rows_failed?: number;
  committed_through?: number;
}

/** Sets the operation's progress (absolute counts); the operation as it is after, cancellation request included. */
export async function updateProgress(
  db: Executor,
  id: number,
  progress: ProgressChange,
  now: string,
): Promise<StoredOperation | undefined> {
  const row = await db
    .updateTable('operations')
    .set((eb) => ({ ...progress, updated_at: now, version: eb('version', '+', eb.lit(1)) }))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

/** Ends an unfinished operation; undefined when it had ended already. */
export async function finishOperation(
  db: Executor,
  id: number,
  end: ProgressChange & { status: 'succeeded' | 'failed' | 'cancelled'; summary: string },
  now: string,
): Promise<StoredOperation | undefined> {
  const row = await db
    .updateTable('operations')
    .set((eb) => ({
      ...end,
      finished_at: now,
      updated_at: now,
      lease_until: null,
      version: eb('version', '+', eb.lit(1)),
    }))
    .where('id', '=', id)
    .where('status', 'in', ['queued', 'running'])
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

/** Asks a running operation to stop at its next commit; the operation after, or undefined when it is not found. */
export async function requestCancel(db: Executor, id: number, now: string): Promise<StoredOperation | undefined> {
  const row = await db
    .updateTable('operations')
    .set((eb) => ({ cancel_requested: 1, updated_at: now, version: eb('version', '+', eb.lit(1)) }))
    .where('id', '=', id)
    .where('status', 'in', ['queued', 'running'])
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

const ERROR_FIELDS = ['operation_id', 'seq', 'row', 'field', 'problem', 'detail'] as const;
/** Rows of errors one insert takes at most (6 parameters each, well under either database's limit). */
const ERRORS_PER_INSERT = 1000;

export async function insertOperationErrors(db: Executor, errors: readonly NewOperationError[]): Promise<void> {
  for (let start = 0; start < errors.length; start += ERRORS_PER_INSERT)
    await db
      .insertInto('operation_errors')
      .values(errors.slice(start, start + ERRORS_PER_INSERT).map((error) => pick(error)))
      .execute();
}

/**
 * A row's error as stored: its field and detail may quote what the file held (a key of an NDJSON
 * row, `{"a\u0000b": 1}`, is refused by its name), made storable (db/storable-text.ts).
 */
const pick = (error: NewOperationError): NewOperationError => ({
  ...(Object.fromEntries(ERROR_FIELDS.map((field) => [field, error[field]])) as NewOperationError),
  field: storableOrNull(error.field),
  detail: storableText(error.detail),
});

const numericError = (row: OperationErrorRow): StoredOperationError => ({
  ...row,
  seq: Number(row.seq),
  row: Number(row.row),
  operation_id: Number(row.operation_id),
});

/** The operation's errors after `afterSeq`, in order, at most `limit`. */
export async function findOperationErrors(
  db: Executor,
  operationId: number,
  afterSeq: number,
  limit: number,
): Promise<StoredOperationError[]> {
  const rows = await db
    .selectFrom('operation_errors')
    .selectAll()
    .where('operation_id', '=', operationId)
    .where('seq', '>', afterSeq)
    .orderBy('seq')
    .limit(limit)
    .execute();
  return rows.map(numericError);
}

/** Deletes at most `limit` operations that ended before `cutoff`, the oldest first (their errors go with them). */
export async function deleteOperationsBefore(trx: Trx, cutoff: string, limit: number): Promise<number> {
  const result = await trx
    .deleteFrom('operations')
    .where(
      'id',
      'in',
      trx.selectFrom('operations').select('id').where('finished_at', '<', cutoff).orderBy('finished_at').limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The first `perOperation` errors of each of the operations (one query for a page of them). */
export async function findFirstErrors(
  db: Executor,
  operationIds: number[],
  perOperation: number,
): Promise<StoredOperationError[]> {
  if (operationIds.length === 0) return [];
  const rows = await db
    .selectFrom('operation_errors')
    .selectAll()
    .where('operation_id', 'in', operationIds)
    .where('seq', '<=', perOperation)
    .orderBy('operation_id')
    .orderBy('seq')
    .execute();
  return rows.map(numericError);
}

/** The backup that is queued or running, if one is (there is at most one: migration 0017). */
export async function findUnfinishedBackup(db: Executor): Promise<StoredOperation | undefined> {
  const row = await db
    .selectFrom('operations')
    .selectAll()
    .where('kind', '=', 'backup')
    .where('status', 'in', ['queued', 'running'])
    .executeTakeFirst();
  return row === undefined ? undefined : numeric(row);
}

/** Hands a new operation to the process that holds its file (once the file is in its place). */
export async function setHolder(db: Executor, id: number, holder: string, leaseUntil: string): Promise<void> {
  await db.updateTable('operations').set({ holder, lease_until: leaseUntil }).where('id', '=', id).execute();
}
