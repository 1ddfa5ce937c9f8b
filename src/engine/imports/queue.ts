import type { Principal } from '../../auth/principals.js';
import type { Config } from '../../config/config.js';
import type { Executor } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { importTooLarge } from './upload.js';
import { measureImportQueue, type ImportCaller, type QueueMeasure } from '../operations/import-turns.repository.js';

/**
 * What the import queue may hold (docs/bulk.md "Queue and turns"): per caller, at most
 * ROWI_IMPORT_QUEUE_MAX imports waiting and ROWI_IMPORT_QUEUE_BYTES in their files (429
 * import-queue-full); for everyone, at most ROWI_IMPORT_SPOOL_BYTES in the files of imports waiting
 * or running (507 import-spool-full). Counted in the database, so across --workers and instances.
 *
 * An upload is measured three times: before its file is read (a queue already full, or a
 * Content-Length that cannot fit, is refused without reading it), as it arrives (refused as soon as
 * it outgrows the room left when it started), and in the transaction that queues it, under the
 * lock the claims take (import-turns), which alone is exact: two uploads that each fitted when they
 * started cannot both be queued past a limit.
 */

/** Seconds a caller whose queue is full is told to wait: about an import's turn. */
const QUEUE_RETRY_S = 30;
/** Seconds to wait when the files of every caller fill the space: longer, as it takes imports to end. */
const SPOOL_RETRY_S = 60;

type Limits = Pick<Config, 'importQueueMax' | 'importQueueBytes' | 'importSpoolBytes' | 'importMaxBytes'>;

/** The caller whose queue an upload joins: its caller id, or an external subject's name. */
export function importCallerOf(principal: Pick<Principal, 'callerId' | 'name'>): ImportCaller {
  return { callerId: principal.callerId, subject: principal.callerId === null ? principal.name : null };
}

/** The room this upload has: the most bytes it may hold, and the refusal once it holds more. */
export interface UploadRoom {
  maxBytes: number;
  overMax: (reached: number) => AppError;
}

/**
 * Before the file is read: refuses at once an upload that cannot be queued now (`declared`: its
 * Content-Length, when sent); otherwise the room it has while it arrives.
 */
export async function admitUpload(
  db: Executor,
  caller: ImportCaller,
  limits: Limits,
  declared: number | undefined,
): Promise<UploadRoom> {
  const measure = await measureImportQueue(db, caller);
  const refusal = refusalOf(measure, limits, declared ?? 0);
  if (refusal !== undefined) throw refusal;
  const rooms: UploadRoom[] = [];
  if (limits.importQueueBytes > 0)
    rooms.push({
      maxBytes: limits.importQueueBytes - measure.queuedBytes,
      overMax: (reached) =>
        reached > limits.importQueueBytes
          ? importTooLarge(limits.importQueueBytes, 'ROWI_IMPORT_QUEUE_BYTES')
          : queueFull(measure, limits),
    });
  if (limits.importSpoolBytes > 0)
    rooms.push({ maxBytes: limits.importSpoolBytes - measure.spooledBytes, overMax: spoolFull });
  return rooms.reduce((smallest, room) => (room.maxBytes < smallest.maxBytes ? room : smallest), {
    maxBytes: limits.importMaxBytes,
    overMax: () => importTooLarge(limits.importMaxBytes),
  });
}

/** In the transaction that queues the file (under the claims' lock): refuses it when it no longer fits. */
export async function checkQueueRoom(db: Executor, caller: ImportCaller, limits: Limits, bytes: number): Promise<void> {
  const refusal = refusalOf(await measureImportQueue(db, caller), limits, bytes);
  if (refusal !== undefined) throw refusal;
}

function refusalOf(measure: QueueMeasure, limits: Limits, bytes: number): AppError | undefined {
  if (limits.importQueueBytes > 0 && bytes > limits.importQueueBytes)
    return importTooLarge(limits.importQueueBytes, 'ROWI_IMPORT_QUEUE_BYTES');
  if (limits.importQueueMax > 0 && measure.queued >= limits.importQueueMax) return queueFull(measure, limits);
  if (limits.importQueueBytes > 0 && measure.queuedBytes + bytes > limits.importQueueBytes)
    return queueFull(measure, limits);
  if (limits.importSpoolBytes > 0 && measure.spooledBytes + bytes > limits.importSpoolBytes) return spoolFull();
  return undefined;
}

function queueFull(measure: QueueMeasure, limits: Limits): AppError {
  const bounds = [
    limits.importQueueMax > 0 ? `${limits.importQueueMax} imports` : undefined,
    limits.importQueueBytes > 0 ? `${limits.importQueueBytes} bytes of files` : undefined,
  ].filter((bound) => bound !== undefined);
  return new AppError(
    'import-queue-full',
    `This caller has ${measure.queued} imports waiting (${measure.queuedBytes} bytes); it may have at most ${bounds.join(' and ')} waiting. Nothing of this file was kept: upload it again once an import of yours has started (Retry-After).`,
    {
      headers: { 'retry-after': String(QUEUE_RETRY_S) },
      extensions: {
        queued: measure.queued,
        queued_bytes: measure.queuedBytes,
        max_queued: limits.importQueueMax === 0 ? null : limits.importQueueMax,
        max_queued_bytes: limits.importQueueBytes === 0 ? null : limits.importQueueBytes,
      },
    },
  );
}

function spoolFull(): AppError {
  return new AppError(
    'import-spool-full',
    'The files waiting for their import fill the space rowi keeps for them (ROWI_IMPORT_SPOOL_BYTES). Nothing of this file was kept: upload it again once imports have ended (Retry-After).',
    { headers: { 'retry-after': String(SPOOL_RETRY_S) } },
  );
}
