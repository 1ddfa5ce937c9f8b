import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { accessFromStored, type RequestAccess } from '../../auth/access.js';
import { nowTimestamp } from '../../db/clock.js';
import { StorageCorruptError } from '../../db/corruption.js';
import { isCorruption } from '../../db/driver-errors.js';
import type { Db, Trx } from '../../db/database.js';
import { unitOfWork } from '../../db/unit-of-work.js';
import { SEES_ALL } from '../../db/visibility.js';
import { recordEvent } from '../../outbox/outbox.js';
import { runImport } from './run.js';
import type { ImportTarget } from './target.js';
import type { BudgetSpender } from '../../rate-limits/rate-limit.js';
import type { Budget } from '../../rate-limits/rate-limiter.js';
import {
  callerKey,
  findImportTurns,
  findLastStarts,
  holdsQueuedImport,
  type ImportTurn,
} from '../operations/import-turns.repository.js';
import {
  findAbandoned,
  findOperationById,
  findQueued,
  finishOperation,
  lockClaims,
  markRunning,
  renewLeases,
  type StoredOperation,
} from '../operations/operations.repository.js';
import { operationPath, presentOperation, summaryOf } from '../operations/operations.service.js';

/**
 * Runs the imports whose files this process holds (docs/bulk.md "Imports"). Every process
 * (each --workers worker, each instance) has one, with an id of its own (`holder`).
 *
 * - Claiming: a queued operation starts only while fewer than `concurrency` run in the whole
 *   deployment and fewer than `callerConcurrency` for its caller; the count and the claim are one
 *   transaction that takes its turn under a lock (engine/operations/operations.repository.ts lockClaims), so the caps
 *   hold across processes. Turns are fair across callers (nextTurn): a free turn goes to the caller
 *   running the fewest imports, then to the one whose last import started longest ago, whichever
 *   process holds its file; one caller's backlog never keeps another's import waiting behind it.
 * - Leases: the holder renews the lease of its queued and running operations every
 *   LEASE_RENEW_MS; any process marks an operation whose lease ran out failed (its holder was
 *   killed), with the rows it committed: nothing is left `running` after a crash.
 */
const LEASE_MS = 10_000;
const LEASE_RENEW_MS = 2_000;
/** How often queued operations are looked at when nothing wakes the runner. */
const POLL_MS = 500;

export interface ImportRunner {
  /** This process's id as the holder of its operations. */
  readonly holder: string;
  /** The lease a new operation starts with. */
  leaseUntil(): string;
  /** Where an operation's file is spooled. */
  readonly directory: string;
  /** Looks for an operation to start now (a new upload, an ended import). */
  wake(): void;
  /** Ends every import of this process at its next commit, fails its queued ones, and stops. */
  close(): Promise<void>;
}

/** An import as another thread takes it (process/import-thread.ts): everything in it survives a structured clone. */
export interface ImportJob {
  operation: StoredOperation;
  /** The access of the request that asked for the import, restored from the operation (auth/access.ts). */
  access: RequestAccess;
  file: string;
  /** The step of the caller's budget its rows spend (BudgetSpender.step), when they spend one: asked of this thread. */
  budgetStep?: number;
}

/**
 * Where imports run when not on this event loop: a thread of their own with a database connection
 * of their own (process/import-thread.ts), which the process wires in.
 */
export interface ImportElsewhere {
  /**
   * Runs the import; resolves once it has ended (its operation says how), rejects on a fault that
   * left it unended. `budget`: what its rows spend from, on this thread (the rate limits' counters).
   */
  run(job: ImportJob, budget?: BudgetSpender): Promise<void>;
  /** Whether the import of this target can run there (a resource declared beside rowi's own runs here). */
  knows(target: string): boolean;
  /** The imports running there stop at their next commit (the process is stopping). */
  stop(): void;
  /** Ends the thread, once no import runs there. */
  close(): Promise<void>;
}

export function startImportRunner(options: {
  db: Db;
  log: FastifyBaseLogger;
  targets: readonly ImportTarget[];
  concurrency: number;
  /** Imports one caller may run at once (at most `concurrency`). */
  callerConcurrency: number;
  directory: string;
  /** Runs the imports on another thread; without it they run on this event loop, between requests. */
  elsewhere?: ImportElsewhere;
  /** The caller's share of a rate-limit budget a target's rows spend (orders-create); undefined: unlimited. */
  budgets?: (budget: Budget, access: RequestAccess) => BudgetSpender | undefined;
}): ImportRunner {
  const { db, log, concurrency, callerConcurrency, elsewhere } = options;
  const holder = randomUUID();
  const targets = new Map(options.targets.map((target) => [target.name, target]));
  const running = new Map<number, Promise<void>>();
  let stopping = false;
  let claiming: Promise<void> | undefined;
  let again = false;
  const fileOf = (operation: Pick<StoredOperation, 'id' | 'holder'>) => spoolPath(options.directory, operation.id);

  const run = async (operation: StoredOperation) => {
    const target = targets.get(operation.target as ImportTarget['name'])!;
    // It runs with the access of the request that asked for it, as stored with it; never more.
    const access = accessFromStored(operation.access);
    const budget =
      target.rateLimitBudget === undefined || access === undefined
        ? undefined
        : options.budgets?.(target.rateLimitBudget, access);
    try {
      const file = fileOf(operation);
      if (access === undefined) await failAbandoned(db, operation, UNKNOWN_ACCESS);
      else if (elsewhere?.knows(target.name))
        await elsewhere.run(
          { operation, access, file, ...(budget === undefined ? {} : { budgetStep: budget.step }) },
          budget,
        );
      else
        await runImport({
          db,
          log,
          target,
          operation,
          access,
          file,
          stopping: () => stopping,
          turns: true,
          ...(budget === undefined ? {} : { budget }),
        });
    } catch (error) {
      log.error({ err: error, operation: operation.id }, 'an import failed unexpectedly');
      await failAbandoned(db, operation, 'The import met an unexpected fault (logged by rowi); it stopped.').catch(
        (fault: unknown) => log.warn({ err: fault, operation: operation.id }, 'could not mark a failed import'),
      );
    } finally {
      await rm(fileOf(operation), { force: true });
    }
  };

  const claimOnce = async (): Promise<StoredOperation | undefined> => {
    // Most polls end here, without the lock: this process holds no waiting file.
    if (!(await holdsQueuedImport(db, holder))) return undefined;
    return unitOfWork(db, async (trx) => {
      await lockClaims(trx);
      const id = await nextTurn(trx, await findImportTurns(trx, holder), concurrency, callerConcurrency);
      if (id === undefined) return undefined;
      const started = await markRunning(trx, id, nowTimestamp());
      if (started === undefined) return undefined;
      await recordEvent(trx, 'operation.progressed', operationPath(started.id), presentOperation(started, []));
      return started;
    });
  };

  const claim = async () => {
    for (;;) {
      if (stopping) return;
      const started = await claimOnce();
      if (started === undefined) return;
      const job = run(started).finally(() => {
        running.delete(started.id);
        wake();
      });
      running.set(started.id, job);
    }
  };

  /**
   * A background step that fails is said once, until it works again (a database that is down fails
   * every poll); damage is not said here at all: the storage says it once (db/corruption.ts).
   */
  const failing = new Set<string>();
  const quietly = (task: string, what: string, step: () => Promise<void>) =>
    step().then(
      () => void failing.delete(task),
      (error: unknown) => {
        if (failing.has(task) || isCorruption(error) || error instanceof StorageCorruptError) return;
        failing.add(task);
        db.outage.failed(log, task, error, `${what}; said once until it works again`);
      },
    );

  const wake = () => {
    if (stopping) return;
    if (claiming !== undefined) {
      again = true;
      return;
    }
    claiming = quietly('import-claims', 'could not claim an import', claim).finally(() => {
      claiming = undefined;
      if (again) {
        again = false;
        wake();
      }
    });
  };

  const sweep = async () => {
    await renewLeases(db, holder, leaseUntil());
    for (const abandoned of await findAbandoned(db, nowTimestamp(), 16)) {
      await failAbandoned(
        db,
        abandoned,
        abandoned.status === 'queued'
          ? 'The process that held the file stopped before the import started; nothing was read or stored.'
          : 'The process running the import stopped (it was killed or lost its database); the import was ended where its last commit left it.',
      );
      log.warn(
        { operation: abandoned.id, committed_through: abandoned.committed_through },
        `marked an abandoned ${abandoned.kind} failed`,
      );
    }
  };

  const leaseTimer = setInterval(() => {
    void quietly('import-leases', 'could not renew or sweep import leases', sweep);
  }, LEASE_RENEW_MS);
  leaseTimer.unref();
  const pollTimer = setInterval(wake, POLL_MS);
  pollTimer.unref();
  const first = setTimeout(() => {
    void quietly('import-leases', 'could not renew or sweep import leases', sweep);
  }, 50);
  first.unref();

  return {
    holder,
    directory: options.directory,
    leaseUntil,
    wake,
    async close() {
      stopping = true;
      elsewhere?.stop();
      clearInterval(leaseTimer);
      clearInterval(pollTimer);
      clearTimeout(first);
      await claiming;
      await Promise.allSettled(running.values());
      // Queued ones cannot run anywhere else: their file is this process's.
      await unitOfWork(db, async (trx) => {
        for (const queued of await findQueued(trx, holder, 1000)) {
          const ended = await finishOperation(
            trx,
            queued.id,
            {
              status: 'failed',
              summary: JSON.stringify(
                summaryOf(
                  { committed_through: 0, rows_succeeded: 0, rows_failed: 0, dry_run: 0 },
                  'rowi stopped before the import started; nothing was read or stored. Upload the file again.',
                ),
              ),
            },
            nowTimestamp(),
          );
          if (ended !== undefined)
            await recordEvent(trx, 'operation.completed', operationPath(ended.id), presentOperation(ended, []));
          await rm(spoolPath(options.directory, queued.id), { force: true });
        }
      }).catch((error: unknown) => log.warn({ err: error }, 'could not end queued imports while stopping'));
      await elsewhere?.close();
    },
  };
}

/**
 * The import this process may start now, if any: while a turn is free in the deployment, the
 * callers that may run one more are ranked by how many they run (fewest first), then by when their
 * last import started (longest ago, or never, first: a round robin), then by their oldest waiting
 * import. Only the first caller's turn is taken, and only by a process that holds one of its files;
 * another process holds the rest and takes it at its next look (within POLL_MS).
 */
async function nextTurn(
  trx: Trx,
  turns: ImportTurn[],
  concurrency: number,
  callerConcurrency: number,
): Promise<number | undefined> {
  const running = turns.reduce((total, turn) => total + turn.running, 0);
  if (running >= concurrency) return undefined;
  const waiting = turns.filter((turn) => turn.oldestQueued !== null && turn.running < callerConcurrency);
  if (waiting.length === 0) return undefined;
  const fewest = Math.min(...waiting.map((turn) => turn.running));
  const tied = waiting.filter((turn) => turn.running === fewest);
  const lastStarts = tied.length > 1 ? await findLastStarts(trx, tied) : new Map<string, string>();
  const since = (turn: ImportTurn) => lastStarts.get(callerKey(turn)) ?? '';
  tied.sort((a, b) => since(a).localeCompare(since(b)) || a.oldestQueued! - b.oldestQueued!);
  return tied[0]!.held ?? undefined;
}

/**
 * Why an operation without the access of its request is not run: one queued by a rowi that did not
 * store it (before migration 0018) would otherwise run with rights its caller may not have had.
 */
const UNKNOWN_ACCESS =
  'The import was queued by an earlier version of rowi, which did not keep the access of the request that asked for it, so it was not run: nothing was read or stored. Upload the file again.';

function leaseUntil(): string {
  return new Date(Date.now() + LEASE_MS).toISOString();
}

/** Where operation `id`'s file waits (the upload is renamed there once its operation exists). */
export function spoolPath(directory: string, id: number): string {
  return join(directory, `operation-${id}.upload`);
}

/** Ends an operation its runner can no longer finish, keeping what its last commit recorded. */
async function failAbandoned(db: Db, claimed: StoredOperation, detail: string): Promise<void> {
  await unitOfWork(db, async (trx) => {
    const operation = (await findOperationById(trx, claimed.id, SEES_ALL)) ?? claimed;
    if (operation.kind === 'backup') {
      // Its process was killed: the copy it was writing is a temporary file, never a backup (db/backup.ts).
      const ended = await finishOperation(
        trx,
        operation.id,
        {
          status: 'failed',
          summary: JSON.stringify({
            detail:
              'The process taking the backup stopped (it was killed or lost its database) before the backup was whole; no backup was written. Start another.',
            backup: null,
            problem: { type: 'service-unavailable', status: 503 },
          }),
        },
        nowTimestamp(),
      );
      if (ended !== undefined)
        await recordEvent(trx, 'operation.completed', operationPath(ended.id), presentOperation(ended, []));
      return;
    }
    const committed = operation.dry_run === 1 || operation.committed_through === 0 ? 0 : operation.rows_succeeded;
    const ended = await finishOperation(
      trx,
      operation.id,
      { status: 'failed', summary: JSON.stringify(summaryOf(operation, detail, committed)) },
      nowTimestamp(),
    );
    if (ended !== undefined)
      await recordEvent(trx, 'operation.completed', operationPath(ended.id), presentOperation(ended, []));
  });
}
