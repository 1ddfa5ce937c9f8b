import cluster, { type Worker } from 'node:cluster';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { isCorruption, STORAGE_CORRUPT_CODE } from './driver-errors.js';
import { publishToWorkers, topicOf, type Signals } from './signals.js';
import type { StatementGuard } from './sqlite-connection.js';

/** A write refused because the database is known to be damaged: nothing of it was written. */
export class StorageCorruptError extends Error {
  readonly code = STORAGE_CORRUPT_CODE;

  /** `detail`: why the database is taken for damaged. */
  constructor(readonly detail: string) {
    super(`the database is damaged (${detail}): writes are refused`);
  }
}

/** Heard by every process on one SQLite file (the workers of `rowi serve --workers`) when one finds it damaged. */
export const CORRUPT_TOPIC = 'storage:corrupt';

/** Statements a SQLite connection may still run once the file is known to be damaged: those that undo. */
const UNDOING = /^\s*(rollback|release)\b/i;

export interface CorruptionWatchOptions {
  kind: 'sqlite' | 'postgres';
  /** What and where the database is, for the log. */
  describe: string;
  /** SQLite's file: the repair advice names it. */
  file?: string;
  log?: FastifyBaseLogger | undefined;
  /** SQLite: the word between the processes on the file, so that each stops writing when one finds damage. */
  signals?: Signals;
}

/**
 * What this process knows of damage to its database (docs/backups.md "Damaged database").
 * The first statement that fails with SQLITE_CORRUPT / SQLITE_NOTADB (or PostgreSQL's XX001 /
 * XX002) is remembered until the process ends and logged once, with what to do; from then on
 * `/health/ready` fails, and on SQLite every write is refused before it runs (writerGuard): more
 * writes into a damaged file would build on pages that are wrong, and spread the damage. Reads go
 * on; one that meets damage is answered 503 `storage-corrupt`. The workers on one SQLite file tell
 * each other; PostgreSQL instances learn each on its own (its damage is in one table or index,
 * behind PostgreSQL's own write-ahead log, so writes elsewhere are not refused there).
 */
export class CorruptionWatch {
  readonly #options: CorruptionWatchOptions;
  #found: string | undefined;

  constructor(options: CorruptionWatchOptions) {
    this.#options = options;
    options.signals?.subscribe((topic) => {
      if (topic === CORRUPT_TOPIC && this.#found === undefined)
        this.#record('another process on the same file found it damaged', 'learned');
    });
  }

  /** Why the database is taken for damaged (the first error's message), or undefined while it is not. */
  get found(): string | undefined {
    return this.#found;
  }

  /** Looks at an error a statement threw: the first that says the database is damaged is recorded. */
  readonly observe = (error: unknown): void => {
    if (this.#found !== undefined || !isCorruption(error) || error instanceof StorageCorruptError) return;
    this.#record((error as Error).message, 'found', error);
    this.#options.signals?.publish(CORRUPT_TOPIC).catch(() => {});
  };

  /** Damage found beside the statements (the start's check, going on while rowi serves): `detail` says what. */
  report(detail: string): void {
    if (this.#found === undefined) this.#record(detail, 'found');
  }

  /** What a reading connection needs: its errors observed. */
  readonly readerGuard: StatementGuard = { failed: this.observe };

  /** What the SQLite writer needs: its errors observed, and once damage is known, nothing but undoing run. */
  readonly writerGuard: StatementGuard = {
    failed: this.observe,
    before: (sql) => {
      if (this.#found !== undefined && !UNDOING.test(sql)) throw new StorageCorruptError(this.#found);
    },
  };

  #record(detail: string, how: 'found' | 'learned', error?: unknown): void {
    this.#found = detail;
    const { log, kind, describe, file } = this.#options;
    const effect =
      kind === 'sqlite'
        ? 'writes are refused (503 storage-corrupt), /health/ready fails and reads that meet the damage get 503, until rowi is restarted on a sound file'
        : '/health/ready fails and requests that meet the damage get 503 storage-corrupt, until rowi is restarted';
    const message =
      how === 'learned'
        ? `${describe} is damaged: ${detail}; here too, ${effect}`
        : `${describe} is damaged (${detail}): ${effect}. ${repairAdvice(kind, file)}`;
    if (how === 'learned') log?.warn({ storage: describe }, message);
    else log?.error({ err: error, storage: describe }, message);
  }
}

/**
 * The primary of `rowi serve --workers N` on a SQLite file: damage it learns of (its start's check,
 * still going on once the workers run, or a worker's, which relayWorkerSignals passes to the
 * others) reaches every worker, and a worker started later as soon as it is ready.
 */
export class WorkersDamage {
  #damaged = false;

  constructor() {
    cluster.on('message', (_worker, message: unknown) => {
      if (topicOf(message) === CORRUPT_TOPIC) this.#damaged = true;
    });
  }

  found(detail: string, watch: CorruptionWatch): void {
    watch.report(detail);
    this.#damaged = true;
    publishToWorkers(CORRUPT_TOPIC);
  }

  /** Damage another process found (the preparer's start check of SQLite, process/preparer.ts) and reported there. */
  foundElsewhere(): void {
    this.#damaged = true;
    publishToWorkers(CORRUPT_TOPIC);
  }

  ready(worker: Worker): void {
    if (this.#damaged) publishToWorkers(CORRUPT_TOPIC, [worker]);
  }
}

/** A command, or a start, that met damage stops with exit code 2, saying where it is and what to do. */
export function damagedAtStart(config: Pick<Config, 'databaseUrl' | 'data'>, error: unknown): ConfigError {
  const detail = error instanceof StorageCorruptError ? error.detail : (error as Error).message;
  if (config.databaseUrl !== '')
    return new ConfigError(
      `the PostgreSQL database of ROWI_DATABASE_URL reports damage (${detail}); rowi stopped. ${repairAdvice('postgres')}`,
    );
  return new ConfigError(
    `ROWI_DATA=${JSON.stringify(config.data)} is damaged (${detail}); rowi stopped. ${repairAdvice('sqlite', config.data)}`,
  );
}

/** What an operator does about a damaged database: said at start (exit 2) and in the log. */
export function repairAdvice(kind: 'sqlite' | 'postgres', file = 'rowi.db'): string {
  if (kind === 'postgres') {
    return "Ask PostgreSQL's administrator: a damaged index (XX002) is rebuilt with REINDEX, a damaged table restored from a backup (amcheck and the server log say which); then restart rowi.";
  }
  const copy = file.endsWith('.db') ? `${file.slice(0, -3)}-recovered.db` : `${file}.recovered`;
  // .recover reads around damaged pages but needs a sqlite3 built with it (sqlite.org's are;
  // Debian 12's is not); .dump is in every one, and ends in ROLLBACK where it met damage.
  return (
    `Stop every rowi on ${file} and keep a copy of it with its -wal file. Then restore the latest backup, or copy what can still be read into a new file: ` +
    `sqlite3 ${file} .recover | sqlite3 ${copy} (or, with a sqlite3 without .recover: sqlite3 ${file} .dump | sed 's/^ROLLBACK; -- due to errors$/COMMIT;/' | sqlite3 ${copy}), ` +
    `check it (sqlite3 ${copy} "pragma integrity_check" says ok) and point ROWI_DATA at it; rows on damaged pages are lost.`
  );
}
