import { storedAccessOf, type RequestAccess } from '../../auth/access.js';
import { nowTimestamp } from '../../db/clock.js';
import type { Executor, Trx } from '../../db/database.js';
import type { ListQuery } from '../../db/keyset.js';
import type { Sight } from '../../db/visibility.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { recordEvent } from '../../outbox/outbox.js';
import {
  findFirstErrors,
  findOperationById,
  findOperations,
  finishOperation,
  insertOperation,
  requestCancel,
  type StoredOperation,
  type StoredOperationError,
} from './operations.repository.js';
import type { BackupOperation, ImportOperation, ImportTargetName, Operation, RowError } from './operations.schema.js';

/** Row errors an operation shows inline; all of them are at its errors_url. */
export const INLINE_ERRORS = 20;

export const operationPath = (id: number) => `/v1/operations/${id}`;

export type OperationView = Operation & { version: number };

/** What every operation shows, whatever its kind. */
const commonOf = (stored: StoredOperation) => ({
  id: stored.id,
  status: stored.status,
  created_by: stored.created_by,
  caller_name: stored.caller_name,
  created_at: stored.created_at,
  updated_at: stored.updated_at,
  started_at: stored.started_at,
  finished_at: stored.finished_at,
  version: stored.version,
});

/**
 * A new operation, queued (no summary, not started), and its first event, in the caller's unit of
 * work. It is the caller's (created_by) and keeps the access of the request that asked for it, with
 * which it runs and which decides who sees it (auth/access.ts, auth/visibility.ts sightOnOperations).
 */
export async function queueOperation(
  trx: Trx,
  operation: Omit<
    Parameters<typeof insertOperation>[1],
    | 'summary'
    | 'version'
    | 'created_at'
    | 'updated_at'
    | 'started_at'
    | 'finished_at'
    | 'created_by'
    | 'caller_name'
    | 'user_id'
    | 'access'
  > & { access: RequestAccess },
): Promise<StoredOperation> {
  const now = nowTimestamp();
  const { access, ...rest } = operation;
  const stored = await insertOperation(trx, {
    ...rest,
    created_by: access.callerId,
    caller_name: access.name,
    user_id: access.userId,
    access: storedAccessOf(access),
    summary: null,
    version: 1,
    created_at: now,
    updated_at: now,
    started_at: null,
    finished_at: null,
  });
  await recordEvent(trx, 'operation.progressed', operationPath(stored.id), presentOperation(stored, []));
  return stored;
}

type BackupOutcome = NonNullable<BackupOperation['summary']>;

/** A backup's stored summary; one stored before failures named their problem has none. */
function backupOutcomeOf(summary: string): BackupOutcome {
  const stored = JSON.parse(summary) as Omit<BackupOutcome, 'problem'> & Partial<Pick<BackupOutcome, 'problem'>>;
  return { ...stored, problem: stored.problem ?? null };
}

export function presentOperation(stored: StoredOperation, errors: readonly StoredOperationError[]): OperationView {
  if (stored.kind === 'backup')
    return {
      ...commonOf(stored),
      kind: 'backup',
      summary: stored.summary === null ? null : backupOutcomeOf(stored.summary),
    };
  return {
    ...commonOf(stored),
    kind: 'import',
    target: stored.target as ImportTargetName,
    media_type: stored.media_type,
    options: { mode: stored.mode, on_conflict: stored.on_conflict, dry_run: stored.dry_run === 1 },
    progress: {
      bytes_read: stored.bytes_read,
      bytes_total: stored.bytes_total,
      rows_read: stored.rows_read,
      rows_succeeded: stored.rows_succeeded,
      rows_skipped: stored.rows_skipped,
      rows_failed: stored.rows_failed,
      committed_through: stored.committed_through,
    },
    summary: stored.summary === null ? null : (JSON.parse(stored.summary) as ImportOperation['summary']),
    errors: errors.map(presentRowError),
    errors_url: `${operationPath(stored.id)}/errors`,
  };
}

export const presentRowError = (error: StoredOperationError): RowError => ({
  row: error.row,
  field: error.field,
  problem: error.problem,
  detail: error.detail,
});

/** The operation with its first errors; 404 when it does not exist or the sight does not show it. */
export async function getOperation(db: Executor, id: number, sight: Sight): Promise<OperationView> {
  const stored = await findOperationById(db, id, sight);
  if (stored === undefined) throw operationNotFound(id);
  return presentOperation(stored, await findFirstErrors(db, [id], INLINE_ERRORS));
}

export async function listOperations(db: Executor, query: ListQuery, sight: Sight) {
  const page = await findOperations(db, query, sight);
  const errors = await findFirstErrors(
    db,
    page.rows.map((row) => row.id),
    INLINE_ERRORS,
  );
  return {
    ...page,
    rows: page.rows.map((row) =>
      presentOperation(
        row,
        errors.filter((error) => error.operation_id === row.id),
      ),
    ),
  };
}

/**
 * Cancels the operation: a queued one ends now (nothing of it ran); a running one is asked to
 * stop, and stops at its next commit (its runner ends it as cancelled, saying which rows it
 * committed). 409 once it has ended.
 */
export async function cancelOperation(trx: Trx, id: number, sight: Sight): Promise<OperationView> {
  const stored = await findOperationById(trx, id, sight);
  if (stored === undefined) throw operationNotFound(id);
  const now = nowTimestamp();
  const backup = stored.kind === 'backup';
  if (stored.status === 'queued') {
    const ended = await finishOperation(
      trx,
      id,
      {
        status: 'cancelled',
        summary: JSON.stringify(
          backup
            ? { detail: 'Cancelled before it started: nothing was copied.', backup: null, problem: null }
            : summaryOf(stored, 'Cancelled before it started: no row was read or stored.'),
        ),
      },
      now,
    );
    if (ended !== undefined) {
      const view = presentOperation(ended, []);
      await recordEvent(trx, 'operation.completed', operationPath(id), view);
      return view;
    }
  }
  // A backup copies one snapshot in a process of its own: once it runs, it ends on its own (it never changes the database).
  if (backup && stored.status === 'running')
    throw new ConflictError(
      'backup-running',
      `Backup ${operationPath(id)} is running and cannot be stopped: it only reads the database, and ends on its own.`,
      { operation: operationPath(id) },
    );
  const asked = await requestCancel(trx, id, now);
  if (asked === undefined) {
    throw new ConflictError(
      'operation-finished',
      `Operation ${id} has already ended (${stored.status}); there is nothing to cancel.`,
    );
  }
  return presentOperation(asked, await findFirstErrors(trx, [id], INLINE_ERRORS));
}

/** What an ended operation says it did: in words, how many rows it kept, and which. */
export function summaryOf(
  stored: Pick<StoredOperation, 'committed_through' | 'rows_succeeded' | 'rows_failed' | 'dry_run'> &
    Partial<Pick<StoredOperation, 'media_type'>>,
  detail: string,
  committed = stored.dry_run === 1 ? 0 : stored.rows_succeeded,
): NonNullable<ImportOperation['summary']> {
  const through = stored.committed_through;
  const except = stored.rows_failed > 0 ? ', except the failed rows listed in errors' : '';
  // Rows are numbered as the file's lines (what an editor or a spreadsheet shows): a CSV file's
  // first row is its header, so 500 records end at row 501.
  const which =
    committed === 0 || through === 0
      ? 'No row was committed.'
      : stored.media_type === 'text/csv'
        ? `The file's rows 2 to ${through} were committed (row 1 is its header)${except}; no later row was.`
        : `The file's rows (lines) 1 to ${through} were committed${except}; no later row was.`;
  return { detail, rows_committed: committed, committed: which };
}

export function operationNotFound(id: number): NotFoundError {
  return new NotFoundError(`There is no operation ${id}.`);
}
