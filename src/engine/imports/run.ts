import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { recordInTransaction, type AuditRecord } from '../../audit-trail/audit-log.js';
import { nowTimestamp } from '../../db/clock.js';
import type { Db, Trx } from '../../db/database.js';
import { isSqlite } from '../../db/dialect.js';
import type { NewOperationError } from '../../db/operation-tables.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { recordEvent } from '../../outbox/outbox.js';
import { KeyRows } from './keys.js';
import { readRows, type ImportMediaType } from './rows.js';
import {
  inSlices,
  type ChunkOutcome,
  type ImportContext,
  type ImportRow,
  type ImportTarget,
  type RowWritten,
} from './target.js';
import {
  findOperationById,
  finishOperation,
  insertOperationErrors,
  updateProgress,
  type ProgressChange,
  type StoredOperation,
} from '../operations/operations.repository.js';
import type { RowError } from '../operations/operations.schema.js';
import { operationPath, presentOperation, summaryOf } from '../operations/operations.service.js';
import { SEES_ALL } from '../../db/visibility.js';
import type { RequestAccess } from '../../auth/access.js';
import type { BudgetSpender } from '../../rate-limits/rate-limit.js';

/**
 * One import, run (docs/bulk.md "Imports"). Rows are read from the spooled file and written in
 * chunks of CHUNK_ROWS, each chunk set-based (the target's few multi-row statements) in a unit of
 * work of its own, with its rows' events, stock movements, audit records, refused rows and the
 * operation's progress (so after a crash the operation says exactly which rows were committed:
 * `committed_through`, less the failed rows listed). Between chunks the event loop is given back,
 * so requests are answered meanwhile; on SQLite a chunk holds the write lock for a few milliseconds.
 *
 * - partial: one pass; good rows are committed chunk by chunk, bad ones reported.
 * - atomic: a first pass checks every row (each chunk written and rolled back, so every rule of
 *   the write is checked, against the stored state) and stores nothing; with any row refused the
 *   operation fails. Otherwise a second pass writes: on PostgreSQL in one transaction (all or
 *   nothing, whatever happens); on SQLite chunk by chunk (one long transaction would hold the one
 *   write lock for the whole import), so a row that a concurrent request makes fail between the two
 *   passes ends the import with the rows before its chunk committed, and the operation says which.
 * - dry_run: the first pass only.
 *
 * Cancelling (and the process stopping) is looked at after every chunk: the import stops there.
 *
 * A target that declares a rate-limit budget (orders: orders-create) spends one unit a row from the
 * caller's budget before each chunk is written, in the first pass that writes its rows (the check of
 * an atomic import or a dry run, else the write), so a file's rows cost what their single requests
 * would, once. When the budget is spent the import waits for it to refill, a second at a time,
 * looking at cancelling and the process stopping between waits (spendBudget).
 */

/**
 * Rows a chunk writes at once: large enough for multi-row statements and one commit to pay, small
 * enough for short locks. Each chunk's COMMIT writes its pages to the WAL and waits for the disk on
 * the event loop (synchronous=FULL), so fewer, larger chunks make an import faster (docs/performance.md
 * "Imports"), while a chunk holds SQLite's write lock as long as it runs: the wait of a write behind it.
 */
export const CHUNK_ROWS = 1000;
/** Progress written and operation.progressed sent at most this often (besides each chunk's own progress). */
const PROGRESS_EVERY_MS = 1000;

export interface RunContext {
  db: Db;
  log: FastifyBaseLogger;
  target: ImportTarget;
  operation: StoredOperation;
  file: string;
  /** The access of the request that asked for it, restored from the operation (engine/imports/runner.ts). */
  access: RequestAccess;
  /** True once the process is stopping: the import stops at its next commit. */
  stopping: () => boolean;
  /** Whether the writes give the event loop turns (ImportContext.turns): not on the import thread. */
  turns: boolean;
  /** The caller's share of the target's rate-limit budget; undefined: none, or unlimited. */
  budget?: BudgetSpender;
}

/** The longest an import waits for its budget before it looks at cancelling and the process stopping again. */
const BUDGET_WAIT_MS = 1000;

type PassKind = 'check' | 'chunks' | 'one-transaction';

interface PassResult {
  counts: Required<Omit<ProgressChange, 'bytes_read'>> & { bytes_read: number };
  /** Why the pass stopped before the end of the file. */
  stopped?: 'cancelled' | 'stopping' | 'refused' | 'unreadable';
}

/** Thrown inside a unit of work to roll it back on purpose (a check, an atomic chunk with a refused row). */
class RolledBack extends Error {
  constructor(readonly outcome: ChunkOutcome) {
    super('rolled back on purpose');
  }
}

export async function runImport(context: RunContext): Promise<StoredOperation | undefined> {
  const { operation } = context;
  const atomic = operation.mode === 'atomic';
  const errors = new ErrorLog(context.db, operation.id);
  const checking = operation.dry_run === 1 || atomic;
  if (checking) {
    const checked = await runPass(context, 'check', errors, true);
    if (operation.dry_run === 1 || checked.stopped !== undefined || checked.counts.rows_failed > 0)
      return end(context, checked, 'check');
  }
  const written = await runPass(
    context,
    atomic && !isSqlite(context.db) ? 'one-transaction' : 'chunks',
    errors,
    !checking,
  );
  return end(context, written, 'write');
}

/** A pass over the file; `spends`: its rows spend from the target's rate-limit budget (one pass of an import does). */
async function runPass(context: RunContext, kind: PassKind, errors: ErrorLog, spends: boolean): Promise<PassResult> {
  if (kind === 'one-transaction') {
    let result: PassResult | undefined;
    try {
      await unitOfWork(context.db, async (trx) => {
        // Never paced: a transaction is not held open waiting for a budget (the check pass spent it).
        result = await readAndWrite(context, kind, errors, trx, false);
        if (result.stopped !== undefined) throw new RolledBack({ written: [], errors: [] });
      });
    } catch (error) {
      if (!(error instanceof RolledBack)) throw error;
    }
    const done = result!;
    if (done.stopped === undefined) {
      done.counts.committed_through = done.counts.rows_read === 0 ? 0 : lastRowOf(done);
      return done;
    }
    // Nothing of the transaction stayed.
    done.counts.committed_through = 0;
    done.counts.rows_succeeded = 0;
    return done;
  }
  return readAndWrite(context, kind, errors, undefined, spends);
}

const lastRowOf = (result: PassResult & { lastRow?: number }) => result.lastRow ?? 0;

async function readAndWrite(
  context: RunContext,
  kind: PassKind,
  errors: ErrorLog,
  outer: Trx | undefined,
  spends: boolean,
): Promise<PassResult & { lastRow?: number }> {
  const { db, target, operation } = context;
  const source = readRows(context.file, operation.media_type as ImportMediaType, target);
  const counts = {
    bytes_read: 0,
    rows_read: 0,
    rows_succeeded: 0,
    rows_skipped: 0,
    rows_failed: 0,
    committed_through: 0,
  };
  const keys = target.keyOf === undefined ? undefined : new KeyRows();
  const conflict = operation.on_conflict;
  const importContext: ImportContext = {
    onConflict: conflict,
    access: context.access,
    now: nowTimestamp(),
    checking: kind === 'check',
    turns: context.turns,
    carried: new Map(),
  };
  const chunkRows = target.chunkRows ?? CHUNK_ROWS;
  let chunk: ImportRow[] = [];
  let chunkKeys = new Map<string, number>();
  let refused: RowError[] = [];
  let lastRow = 0;
  let lastProgress = 0;
  let stopped: PassResult['stopped'];

  const flush = async (): Promise<void> => {
    const rows = chunk;
    const pending = refused;
    chunk = [];
    chunkKeys = new Map();
    refused = [];
    if (spends && rows.length > 0) {
      const halted = await spendBudget(context, rows.length);
      if (halted !== undefined) {
        // The chunk is not written: the import ends after the last one committed.
        await unitOfWork(db, (trx) => errors.write(trx, pending));
        stopped = halted;
        return;
      }
    }
    importContext.now = nowTimestamp();
    counts.bytes_read = source.bytesRead();
    const through = lastRow;
    let outcome: ChunkOutcome;
    let stored: StoredOperation | undefined;
    if (kind === 'chunks') {
      try {
        stored = await unitOfWork(db, async (trx) => {
          const written =
            rows.length === 0 ? { written: [], errors: [] } : await target.write(trx, rows, importContext);
          if (operation.mode === 'atomic' && written.errors.length > 0) throw new RolledBack(written);
          tally(counts, written);
          counts.committed_through = through;
          await turn();
          await inSlices(trx, importContext, auditRecords(context, written.written), (slice) =>
            recordInTransaction(trx, slice),
          );
          await errors.write(trx, [...pending, ...written.errors]);
          return progress(trx, context, counts, () => {
            const due = Date.now() - lastProgress >= PROGRESS_EVERY_MS;
            if (due) lastProgress = Date.now();
            return due;
          });
        });
      } catch (error) {
        if (!(error instanceof RolledBack)) throw error;
        // An atomic import's second pass met a row a concurrent change made fail: the chunk is undone, the import ends.
        tally(counts, { written: [], errors: error.outcome.errors });
        await unitOfWork(db, (trx) => errors.write(trx, [...pending, ...error.outcome.errors]));
        stopped = 'refused';
        return;
      }
    } else {
      if (kind === 'check') {
        try {
          await unitOfWork(db, async (trx) => {
            throw new RolledBack(
              rows.length === 0 ? { written: [], errors: [] } : await target.write(trx, rows, importContext),
            );
          });
          throw new Error('a checked chunk was not rolled back');
        } catch (error) {
          if (!(error instanceof RolledBack)) throw error;
          outcome = error.outcome;
        }
      } else {
        outcome = rows.length === 0 ? { written: [], errors: [] } : await target.write(outer!, rows, importContext);
        if (outcome.errors.length > 0) stopped = 'refused';
        await recordInTransaction(outer!, auditRecords(context, outcome.written));
      }
      tally(counts, outcome);
      const shown = { ...counts, committed_through: 0 };
      stored = await unitOfWork(db, async (trx) => {
        await errors.write(trx, [...pending, ...outcome.errors]);
        if (Date.now() - lastProgress < PROGRESS_EVERY_MS) return findOperationById(trx, operation.id, SEES_ALL);
        lastProgress = Date.now();
        return progress(
          trx,
          context,
          kind === 'check' ? { ...shown, rows_succeeded: 0, rows_skipped: 0 } : shown,
          () => true,
        );
      });
    }
    if (stored?.cancel_requested === 1) stopped ??= 'cancelled';
    else if (context.stopping()) stopped ??= 'stopping';
    await turn();
  };

  for await (const fileRow of source.rows) {
    counts.rows_read++;
    lastRow = fileRow.through ?? fileRow.row;
    if (fileRow.error !== undefined) {
      counts.rows_failed++;
      refused.push(fileRow.error);
      if (fileRow.fatal === true) {
        stopped = 'unreadable';
        break;
      }
    } else {
      const value = fileRow.value as never;
      const key = keys === undefined ? undefined : target.keyOf!(value);
      const first = key === undefined ? undefined : keys!.firstRowOf(key, fileRow.row);
      if (key !== undefined && first !== undefined) {
        if (conflict === 'error') {
          counts.rows_failed++;
          refused.push({
            row: fileRow.row,
            field: target.keyField ?? null,
            problem: 'duplicate-in-file',
            detail: `has the same ${target.keyField ?? 'key'} as row ${first} of this file (on_conflict=error)`,
          });
        } else if (conflict === 'skip') counts.rows_skipped++;
        else {
          // update: the later row wins; within one chunk the earlier one is replaced (it counts as done).
          const index = chunkKeys.get(key);
          if (index === undefined) {
            chunkKeys.set(key, chunk.length);
            chunk.push({ row: fileRow.row, value });
          } else {
            chunk[index] = { row: fileRow.row, value };
            counts.rows_succeeded++;
          }
        }
      } else {
        if (key !== undefined) chunkKeys.set(key, chunk.length);
        chunk.push({ row: fileRow.row, value });
      }
    }
    if (chunk.length >= chunkRows || refused.length >= CHUNK_ROWS) {
      await flush();
      if (stopped !== undefined) break;
    }
  }
  if (stopped === undefined || stopped === 'unreadable') await flush();
  counts.bytes_read = source.bytesRead();
  return { counts, lastRow, ...(stopped === undefined ? {} : { stopped }) };
}

/**
 * Spends `units` from the caller's budget, a step at a time, waiting while it is spent (at most
 * BUDGET_WAIT_MS at once, then looking again): resolves once spent, or with why the import is to
 * stop instead (cancelled, or the process stopping).
 */
async function spendBudget(context: RunContext, units: number): Promise<'cancelled' | 'stopping' | undefined> {
  const budget = context.budget;
  if (budget === undefined) return undefined;
  for (let left = units; left > 0;) {
    if (context.stopping()) return 'stopping';
    const step = Math.min(left, budget.step);
    const taken = await budget.take(step);
    if (taken.allowed) {
      left -= step;
      continue;
    }
    await sleep(Math.min(Math.max(taken.retryMs, 1), BUDGET_WAIT_MS));
    const operation = await findOperationById(context.db, context.operation.id, SEES_ALL);
    if (operation?.cancel_requested === 1) return 'cancelled';
  }
  return undefined;
}

function tally(counts: PassResult['counts'], outcome: ChunkOutcome): void {
  for (const written of outcome.written) {
    if (written.outcome === 'skipped') counts.rows_skipped++;
    else counts.rows_succeeded++;
  }
  counts.rows_failed += outcome.errors.length;
}

async function progress(
  trx: Trx,
  context: RunContext,
  counts: ProgressChange,
  announce: () => boolean,
): Promise<StoredOperation | undefined> {
  const stored = await updateProgress(trx, context.operation.id, counts, nowTimestamp());
  if (stored !== undefined && announce())
    await recordEvent(trx, 'operation.progressed', operationPath(stored.id), presentOperation(stored, []));
  return stored;
}

function auditRecords(context: RunContext, written: readonly RowWritten[]): AuditRecord[] {
  const { operation, target, access } = context;
  const at = Date.now();
  return written
    .filter((row) => row.outcome !== 'skipped' && row.id !== undefined)
    .map((row) => {
      const created = row.outcome === 'created' && target.name !== 'stock';
      return {
        at,
        request_id: operation.request_id,
        caller_id: access.callerId,
        caller_name: access.name,
        credential: access.credential,
        user_id: access.userId,
        method: created ? 'POST' : 'PUT',
        path: target.recordPath(row.id!),
        resource: target.resource,
        record_id: String(row.id),
        action: created ? 'create' : 'update',
        status: created ? 201 : 200,
        duration_ms: 0,
        client_ip: null,
      };
    });
}

/** How the pass ended, as the operation's end: its status, counts and summary, with operation.completed. */
async function end(
  context: RunContext,
  result: PassResult & { lastRow?: number },
  pass: 'check' | 'write',
): Promise<StoredOperation | undefined> {
  const { operation } = context;
  const counts = result.counts;
  const check = pass === 'check';
  const committed = check ? 0 : counts.rows_succeeded;
  const through = check ? 0 : counts.committed_through;
  const { status, detail } = endOf(operation, result, check);
  const summary = summaryOf(
    {
      committed_through: through,
      rows_succeeded: committed,
      rows_failed: counts.rows_failed,
      dry_run: check ? 1 : 0,
      media_type: operation.media_type,
    },
    detail,
    committed,
  );
  return unitOfWork(context.db, async (trx) => {
    const ended = await finishOperation(
      trx,
      operation.id,
      { ...counts, committed_through: through, status, summary: JSON.stringify(summary) },
      nowTimestamp(),
    );
    if (ended !== undefined)
      await recordEvent(trx, 'operation.completed', operationPath(ended.id), presentOperation(ended, []));
    return ended;
  });
}

function endOf(
  operation: StoredOperation,
  result: PassResult,
  check: boolean,
): { status: 'succeeded' | 'failed' | 'cancelled'; detail: string } {
  const failed = result.counts.rows_failed;
  const atomic = operation.mode === 'atomic';
  switch (result.stopped) {
    case 'cancelled':
      return { status: 'cancelled', detail: 'Cancelled: the import stopped at its next commit.' };
    case 'stopping':
      return { status: 'failed', detail: 'rowi stopped while the import ran; it stopped at its next commit.' };
    case 'unreadable':
      return { status: 'failed', detail: 'The file cannot be read to its end (see the last error).' };
    case 'refused':
      return {
        status: 'failed',
        detail: 'A row was refused while the rows were written (a concurrent change); the import stopped there.',
      };
    default:
  }
  if (failed > 0 && (atomic || (check && atomic)))
    return {
      status: 'failed',
      detail: `${rowsOf(failed)} ${failed === 1 ? 'was' : 'were'} refused, so nothing was stored (mode=atomic).`,
    };
  if (operation.dry_run === 1)
    return {
      status: 'succeeded',
      detail: `Dry run: ${rowsOf(result.counts.rows_succeeded)} would be stored${failed > 0 ? `, ${failed} refused` : ''}; nothing was stored.`,
    };
  return {
    status: 'succeeded',
    detail: `${rowsOf(result.counts.rows_succeeded)} stored, ${result.counts.rows_skipped} skipped, ${failed} refused.`,
  };
}

const rowsOf = (count: number) => `${count} ${count === 1 ? 'row' : 'rows'}`;

/** The refused rows of an operation, numbered in the order they are written. */
class ErrorLog {
  #seq = 0;
  constructor(
    readonly db: Db,
    readonly operationId: number,
  ) {}

  async write(trx: Trx, errors: readonly RowError[]): Promise<void> {
    if (errors.length === 0) return;
    // A chunk's refusals, read ones and written ones, in the file's order.
    const rows: NewOperationError[] = [...errors]
      .sort((a, b) => a.row - b.row)
      .map((error) => ({
        operation_id: this.operationId,
        seq: ++this.#seq,
        row: error.row,
        field: error.field,
        problem: error.problem,
        detail: error.detail.slice(0, 2000),
      }));
    await insertOperationErrors(trx, rows);
  }
}
