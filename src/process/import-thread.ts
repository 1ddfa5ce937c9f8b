import { IMPORTERS } from '../api/importers.js';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import type { Commits } from '../db/commits.js';
import { writeLockReleases } from '../db/sqlite-lock.js';
import { faultOf } from '../observability/logger.js';
import type { BudgetSpender } from '../rate-limits/rate-limit.js';
import type { ImportElsewhere, ImportJob } from '../engine/imports/runner.js';

/** The thread's entry, as built (dist/); running from the sources (the in-process tests) there is none. */
const ENTRY = new URL('./import-thread-entry.js', import.meta.url);
/** How long a closing thread may take to close its database before it is ended. */
const CLOSE_MS = 10_000;

/** What the thread is handed when it starts. */
export interface ImportThreadData {
  config: Config;
  /** The count of write transactions the process's SQLite connections ended (db/sqlite-lock.ts). */
  lockReleases: SharedArrayBuffer;
}

/** What the main thread tells the import thread: the budget's answer to a `spend` too. */
export type ToImportThread =
  { run: ImportJob } | { spent: { request: number; allowed: boolean; retryMs: number } } | 'stop' | 'close';

/**
 * What the import thread tells the main thread: a unit that wrote events committed, how an import
 * ended, or that an import's rows would spend `units` of its caller's budget (whose counters, shared
 * with the requests and, with Redis, with every instance, live on the main thread).
 */
export type FromImportThread =
  | 'events'
  | { ended: number }
  | { failed: number; error: unknown }
  | { spend: { operation: number; request: number; units: number } };

/**
 * Imports on a thread of their own (docs/bulk.md "Imports"): reading the spooled file,
 * checking its rows and writing its chunks, on a database connection of the thread's, so that an
 * import never takes the event loop that answers requests, nor requests the import's.
 * The main thread keeps what the deployment sees of it: the operation's claim and lease
 * (engine/imports/runner.ts), and the event feed, which the thread's commits wake through a
 * message. Answers undefined where imports are to run on the event loop (ROWI_IMPORT_THREAD=main,
 * or auto on PostgreSQL: importsRunOn) and where the thread cannot run (from the sources; on an
 * in-memory SQLite database, which exists on its one connection only): imports then run on the
 * event loop.
 */
export function importThreadStarter(
  config: Config,
  log: FastifyBaseLogger,
  commits: Commits,
): ImportElsewhere | undefined {
  const setting = `ROWI_IMPORT_THREAD=${config.importThread}`;
  const instead = importsRunOn(config) === 'main' ? setting : threadCannotRun(config, setting);
  if (instead !== undefined) {
    log.info({ imports: 'main' }, `imports run on the event loop that answers requests (${instead})`);
    return undefined;
  }
  log.info({ imports: 'thread' }, `imports run on a thread of their own (${setting})`);
  return new ImportThread({ config, lockReleases: writeLockReleases() }, log, commits);
}

/** Why the thread cannot run where the setting asks for it; undefined when it can. */
function threadCannotRun(config: Config, setting: string): string | undefined {
  if (!existsSync(fileURLToPath(ENTRY))) return `${setting}, but the thread's entry is not built: run from the sources`;
  if (config.databaseUrl === '' && config.data === ':memory:')
    return `${setting}, but an in-memory database exists on its one connection only`;
  return undefined;
}

/**
 * Where imports run, as ROWI_IMPORT_THREAD says; `auto` decides by the database. On SQLite a
 * statement runs on the thread that calls it, so an import's chunks on the event loop would hold
 * every request for a statement's time: a thread. On PostgreSQL statements run in the server while
 * the event loop goes on: the thread spares requests nothing there (a GET beside an import had a
 * p99 of 6-9 ms either way) and costs about 40 MB a process, and 25 MB more growth during an
 * import, for a rate 1.05-1.2x the event loop's (bench/NOTES.md "Imports").
 */
export function importsRunOn(config: Pick<Config, 'importThread' | 'databaseUrl'>): 'thread' | 'main' {
  if (config.importThread !== 'auto') return config.importThread;
  return config.databaseUrl === '' ? 'thread' : 'main';
}

interface Waiting {
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * One thread per process, started by its first import (idle, a process holds no thread: about
 * 36 MB less) and kept while the process runs; every import of the process runs there (at most
 * ROWI_IMPORT_CONCURRENCY at once, as the runner claims them). The first import waits for the
 * thread to load its modules, about half a second. A thread that ends while imports run (a fault,
 * its memory exhausted) rejects them: the runner marks each failed with the rows its last commit
 * kept, and the next import starts a new thread.
 */
const THREAD_TARGETS = new Set(IMPORTERS.map((target) => target.name as string));

class ImportThread implements ImportElsewhere {
  readonly #data: ImportThreadData;
  readonly #log: FastifyBaseLogger;
  readonly #commits: Commits;
  readonly #imports = new Map<number, Waiting>();
  /** The budgets the running imports spend from, by operation. */
  readonly #budgets = new Map<number, BudgetSpender>();
  #worker: Worker | undefined;
  #stopping = false;
  /** Whether the event feed is to be woken at the next turn: the commits of one turn wake it once. */
  #waking = false;

  constructor(data: ImportThreadData, log: FastifyBaseLogger, commits: Commits) {
    this.#data = data;
    this.#log = log;
    this.#commits = commits;
  }

  /** The thread imports into rowi's own collections (api/importers.ts), the ones its entry loads. */
  knows(target: string): boolean {
    return THREAD_TARGETS.has(target);
  }

  run(job: ImportJob, budget?: BudgetSpender): Promise<void> {
    const worker = (this.#worker ??= this.#start());
    const id = job.operation.id;
    if (budget !== undefined) this.#budgets.set(id, budget);
    return new Promise<void>((resolve, reject) => {
      this.#imports.set(id, { resolve, reject });
      worker.postMessage({ run: job } satisfies ToImportThread);
      if (this.#stopping) worker.postMessage('stop' satisfies ToImportThread);
    });
  }

  stop(): void {
    this.#stopping = true;
    this.#worker?.postMessage('stop' satisfies ToImportThread);
  }

  /** Ends the thread, once no import runs there: it closes its database and exits. */
  async close(): Promise<void> {
    this.stop();
    const worker = this.#worker;
    if (worker === undefined) return;
    this.#worker = undefined;
    const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('close' satisfies ToImportThread);
    const bound = setTimeout(() => void worker.terminate(), CLOSE_MS);
    await ended;
    clearTimeout(bound);
  }

  #start(): Worker {
    // Its young generation is the process's (16 MB semi-spaces: npm start and the Dockerfile give
    // --max-semi-space-size=16, which V8 takes over a thread's resourceLimits). A chunk's rows and
    // events outlive a smaller one: with 4 MB semi-spaces an import cost 1.06-1.22x the CPU a row,
    // for 9 MB less idle RSS (bench/NOTES.md "The import on a thread of its own").
    const worker = new Worker(ENTRY, { workerData: this.#data });
    worker.on('message', (message: FromImportThread) => {
      if (message === 'events') this.#wakeFeed();
      else if ('spend' in message) this.#spend(worker, message.spend);
      else if ('ended' in message) this.#settle(message.ended)?.resolve();
      else this.#settle(message.failed)?.reject(message.error);
    });
    worker.on('error', (error) => this.#log.error({ err: error }, `the import thread failed: ${faultOf(error)}`));
    worker.on('exit', (code) => {
      if (this.#worker === worker) this.#worker = undefined;
      const lost = [...this.#imports.values()];
      this.#imports.clear();
      this.#budgets.clear();
      for (const waiting of lost) waiting.reject(new Error(`the import thread ended (exit code ${code})`));
    });
    return worker;
  }

  #settle(id: number): Waiting | undefined {
    const waiting = this.#imports.get(id);
    this.#imports.delete(id);
    this.#budgets.delete(id);
    return waiting;
  }

  /** Spends from an import's budget for the thread and answers it (a budget that cannot answer: not allowed, try again soon). */
  #spend(worker: Worker, { operation, request, units }: { operation: number; request: number; units: number }): void {
    const answer = (spent: { allowed: boolean; retryMs: number }) =>
      worker.postMessage({ spent: { request, ...spent } } satisfies ToImportThread);
    const budget = this.#budgets.get(operation);
    if (budget === undefined) return answer({ allowed: true, retryMs: 0 });
    budget.take(units).then(answer, (error: unknown) => {
      this.#log.warn({ err: error, operation }, "could not spend from an import's rate-limit budget");
      answer({ allowed: false, retryMs: 1000 });
    });
  }

  #wakeFeed(): void {
    if (this.#waking) return;
    this.#waking = true;
    setImmediate(() => {
      this.#waking = false;
      this.#commits.eventsCommitted();
    });
  }
}
