import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { RequestAccess } from '../../auth/access.js';
import type { Config } from '../../config/config.js';
import { BackupError, listBackups, manifestOf, readManifest, type BackupManifest } from '../../db/backup.js';
import { POSTGRES_BACKUPS, takeBackup, type BackupPlace } from '../../db/backup-schedule.js';
import { nowTimestamp } from '../../db/clock.js';
import type { Db } from '../../db/database.js';
import { isUniqueViolation } from '../../db/driver-errors.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../errors.js';
import { decodeCursor, encodeCursor } from '../../http/paging.js';
import { recordEvent } from '../../outbox/outbox.js';
import {
  finishOperation,
  findUnfinishedBackup,
  markRunning,
  type StoredOperation,
} from '../../engine/operations/operations.repository.js';
import {
  operationPath,
  presentOperation,
  queueOperation,
  type OperationView,
} from '../../engine/operations/operations.service.js';
import { BACKUP_FAILURES, type Backup, type BackupFailure } from '../../engine/operations/backups.schema.js';

/**
 * Backups over HTTP (docs/backups.md): POST /v1/backups starts one as an
 * operation, and the backups in ROWI_BACKUP_DIR are a collection read from their manifests.
 *
 * - One at a time: a second POST while one is queued or running is refused (409 backup-running,
 *   naming it) rather than queued: the second would copy the same database a moment later. The
 *   database decides it (a unique index over the unfinished backups, migration 0017), so the
 *   refusal holds across --workers and instances.
 * - The copy runs in a process of its own (db/backup.ts), started by the process that took the request,
 *   under the folder's lock (db/backup-lock.ts), which the schedule holds too: while a scheduled
 *   backup runs, the operation stays queued and starts after it.
 * - The process renews the operation's lease as it does an import's (engine/imports/runner.ts); when it is
 *   killed, another process marks the operation failed, and the copy it was writing stays a
 *   temporary file, never a backup.
 */
export const backupPath = (file: string) => `/v1/backups/${encodeURIComponent(file)}`;

/** Why this rowi has no backups to take or list, or undefined when it has. */
export function backupsUnavailable(config: Pick<Config, 'backupDir' | 'databaseUrl'>): ConflictError | undefined {
  if (config.databaseUrl !== '') return new ConflictError('backups-on-postgresql', `${POSTGRES_BACKUPS}.`);
  if (config.backupDir === '')
    return new ConflictError(
      'backups-not-configured',
      'ROWI_BACKUP_DIR is not set: rowi has no folder to write backups to or list them from. Set it (and restart rowi) to take backups.',
    );
  return undefined;
}

export function presentBackup(manifest: BackupManifest): Backup {
  return {
    file: manifest.file,
    bytes: manifest.bytes,
    sha256: manifest.sha256,
    taken_at: manifest.taken_at,
    ms: manifest.ms,
    schema: manifest.schema,
    rows: manifest.rows,
    rowi: manifest.rowi,
    url: backupPath(manifest.file),
  };
}

const backupRunning = (id: number | undefined) =>
  new ConflictError(
    'backup-running',
    id === undefined
      ? 'A backup was started by another request at the same moment; one runs at a time.'
      : `A backup is already queued or running: ${operationPath(id)}. One runs at a time; follow that one, or start another once it has ended.`,
    id === undefined ? undefined : { operation: operationPath(id) },
  );

class Cancelled extends Error {}

export interface BackupRunner {
  /** Queues a backup as an operation and starts it in the background; 409 backup-running while another is unfinished. */
  start(by: { access: RequestAccess; requestId: string }): Promise<OperationView>;
  close(): Promise<void>;
}

export function startBackupRunner({
  db,
  log,
  leases,
  ...place
}: BackupPlace & {
  db: Db;
  log: FastifyBaseLogger;
  /** The process's operation lease: its holder id, renewed by the import runner, and a new lease's end. */
  leases: { holder: string; leaseUntil(): string };
}): BackupRunner {
  const { data, folder } = place;
  const running = new Set<Promise<void>>();
  const stopping = new AbortController();

  const finish = (
    id: number,
    status: 'succeeded' | 'failed',
    summary: { detail: string; backup: Backup | null; problem: { type: BackupFailure; status: number } | null },
  ) =>
    unitOfWork(db, async (trx) => {
      const ended = await finishOperation(trx, id, { status, summary: JSON.stringify(summary) }, nowTimestamp());
      if (ended !== undefined)
        await recordEvent(trx, 'operation.completed', operationPath(id), presentOperation(ended, []));
    });

  const run = async (operation: StoredOperation) => {
    const { id } = operation;
    try {
      const { manifest, removed } = await takeBackup(place, {
        signal: stopping.signal,
        waiting: () =>
          log.info({ operation: id }, `backup ${operationPath(id)} waits for the backup running into ${folder}`),
        starting: async () => {
          const started = await unitOfWork(db, async (trx) => {
            const marked = await markRunning(trx, id, nowTimestamp());
            if (marked !== undefined)
              await recordEvent(trx, 'operation.progressed', operationPath(id), presentOperation(marked, []));
            return marked;
          });
          if (started === undefined) throw new Cancelled();
        },
      });
      await finish(id, 'succeeded', {
        detail: `Backup taken and checked: ${manifest.file} in ROWI_BACKUP_DIR.`,
        backup: presentBackup(manifest),
        problem: null,
      });
      log.info(
        { operation: id, backup: join(folder, manifest.file), bytes: manifest.bytes, sha256: manifest.sha256, removed },
        `backup of ${data} taken: ${join(folder, manifest.file)}`,
      );
    } catch (error) {
      if (error instanceof Cancelled) return;
      const message = stopping.signal.aborted ? 'rowi stopped before the backup started' : (error as Error).message;
      log.error({ operation: id }, `the backup ${operationPath(id)} of ${data} failed: ${message}`);
      const type: BackupFailure = stopping.signal.aborted
        ? 'service-unavailable'
        : error instanceof BackupError && error.diskFull
          ? 'insufficient-storage'
          : 'internal-error';
      await finish(id, 'failed', {
        detail: `The backup failed: ${message}. No backup was written and the database is unchanged.`,
        backup: null,
        problem: { type, status: BACKUP_FAILURES[type] },
      }).catch((fault: unknown) => log.warn({ err: fault, operation: id }, 'could not mark a failed backup'));
    }
  };

  return {
    async start(by) {
      let created: StoredOperation;
      try {
        created = await unitOfWork(db, async (trx) => {
          const unfinished = await findUnfinishedBackup(trx);
          if (unfinished !== undefined) throw backupRunning(unfinished.id);
          const stored = await queueOperation(trx, {
            kind: 'backup',
            target: 'database',
            status: 'queued',
            media_type: 'application/vnd.sqlite3',
            mode: 'atomic',
            on_conflict: 'error',
            dry_run: 0,
            access: by.access,
            request_id: by.requestId,
            holder: leases.holder,
            lease_until: leases.leaseUntil(),
            bytes_total: 0,
          });
          return stored;
        });
      } catch (error) {
        // Two requests at once (two workers): the index let one in; the other is told which.
        if (isUniqueViolation(error, 'operations.kind')) throw backupRunning((await findUnfinishedBackup(db))?.id);
        throw error;
      }
      const job = run(created).finally(() => running.delete(job));
      running.add(job);
      return presentOperation(created, []);
    },
    async close() {
      stopping.abort();
      await Promise.allSettled(running);
    },
  };
}

const CURSOR_SORT = 'backups:-taken_at,-file';
const newestFirst = (a: Pick<Backup, 'taken_at' | 'file'>, b: Pick<Backup, 'taken_at' | 'file'>) =>
  b.taken_at.localeCompare(a.taken_at) || b.file.localeCompare(a.file);

/** A page of the backups in `folder`, newest first; a backup whose manifest is unreadable is left out, and `unreadable` told. */
export async function listBackupPage(
  folder: string,
  query: { limit?: number; cursor?: string },
  unreadable: (error: BackupError) => void,
) {
  let after: { taken_at: string; file: string } | undefined;
  if (query.cursor !== undefined) {
    const position = decodeCursor(query.cursor);
    const [takenAt, file] = position?.values ?? [];
    if (position?.sort !== CURSOR_SORT || typeof takenAt !== 'string' || typeof file !== 'string')
      throw new BadRequestError(
        'Query parameter cursor is not a cursor this API issued (it may be truncated or altered); start again without it.',
        [{ in: 'query', pointer: '#/cursor', detail: 'is not a cursor this API issued; start again without it' }],
        'invalid-query',
      );
    after = { taken_at: takenAt, file };
  }
  const limit = query.limit ?? 50;
  const all = (await listBackups(folder, unreadable)).sort(newestFirst);
  const rest = after === undefined ? all : all.filter((manifest) => newestFirst(after, manifest) < 0);
  const rows = rest.slice(0, limit).map(presentBackup);
  const last = rows.at(-1);
  const nextCursor =
    rest.length > limit && last !== undefined
      ? encodeCursor({ sort: CURSOR_SORT, values: [last.taken_at, last.file] })
      : null;
  return { rows, nextCursor };
}

/**
 * One backup of `folder`, by its file name; 404 when there is none (a file without its manifest is
 * none), and 404 naming the manifest and what is wrong with it when it is unreadable: rowi cannot
 * say what that file holds, and lists it nowhere.
 */
export async function getBackup(folder: string, name: string): Promise<Backup> {
  const notFound = () => new NotFoundError(`There is no backup ${name} in ROWI_BACKUP_DIR.`);
  const file = join(folder, name);
  if (!name.endsWith('.sqlite') || !existsSync(file) || !existsSync(manifestOf(file))) throw notFound();
  let manifest: BackupManifest;
  try {
    manifest = await readManifest(manifestOf(file), manifestOf(name));
  } catch (error) {
    if (!(error instanceof BackupError)) throw error;
    throw new NotFoundError(
      `There is no readable backup ${name} in ROWI_BACKUP_DIR: ${error.message}. Repair or remove the manifest, or take another backup.`,
    );
  }
  if (manifest.file !== name) throw notFound();
  return presentBackup(manifest);
}
