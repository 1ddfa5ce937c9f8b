import type { FastifyBaseLogger } from 'fastify';
import { sql, type QueryExecutorProvider } from 'kysely';
import { faultOf } from '../observability/logger.js';
import { metrics } from '../observability/metrics.js';
import { codeOf, isUnreachable } from './driver-errors.js';

/** While the database cannot be reached, it is asked this often whether it answers again. */
const PROBE_MS = 1000;

/**
 * A database that cannot be reached (PostgreSQL restarting, the network to it cut), logged as what
 * happened rather than once per request or per turn of a background loop (docs/operations.md
 * "Logging"): one line when it becomes unreachable (since when, the error's code), one when it
 * answers again (after how long, how many requests were answered 503 meanwhile), and at most one
 * line per background task in between; the drivers' stacks at debug level only. Each process (each
 * thread that opens the database) keeps its own. The metrics count every failure.
 */
export class DatabaseOutage {
  readonly #log: FastifyBaseLogger | undefined;
  #ping: (() => Promise<unknown>) | undefined;
  /** When this outage began (epoch milliseconds); undefined while the database answers. */
  #since: number | undefined;
  #refused = 0;
  /** The background tasks that have said so during this outage. */
  readonly #told = new Set<string>();
  #probe: NodeJS.Timeout | undefined;
  #probing = false;

  constructor(log: FastifyBaseLogger | undefined) {
    this.#log = log;
  }

  /** The database this watches, asked while it is unreachable whether it answers again. */
  watch(db: QueryExecutorProvider): void {
    this.#ping = () => sql`select 1`.execute(db);
  }

  get unreachable(): boolean {
    return this.#since !== undefined;
  }

  /**
   * A request the database could not take, answered 503: counted, and logged at debug level (the
   * outage's own lines say it) when the database cannot be reached; false for any other failure
   * (a deadlock, a lock not granted in time), which the caller logs itself.
   */
  refused(error: unknown, log: FastifyBaseLogger): boolean {
    if (!isUnreachable(error)) return false;
    this.#begin(error);
    this.#refused++;
    metrics.dbUnreachableErrors.inc({ source: 'request' });
    log.debug({ err: error }, `request answered 503: ${faultOf(error)}`);
    return true;
  }

  /**
   * A background task's failure (`task`: its name, one of rowi's own). The database unreachable:
   * said once by the task during the outage, at warn, without the driver's stack (that is at
   * debug); anything else is logged as the task always did, with its error.
   */
  failed(log: FastifyBaseLogger, task: string, error: unknown, message: string): void {
    if (!isUnreachable(error)) {
      log.warn({ err: error }, message);
      return;
    }
    this.#begin(error);
    metrics.dbUnreachableErrors.inc({ source: task });
    log.debug({ err: error, task }, message);
    if (this.#told.has(task)) return;
    this.#told.add(task);
    log.warn({ task, code: codeOf(error) }, `${message} (the database cannot be reached)`);
  }

  /** Stops asking (the database is being closed). */
  stop(): void {
    clearInterval(this.#probe);
    this.#probe = undefined;
  }

  #begin(error: unknown): void {
    if (this.#since !== undefined) return;
    this.#since = Date.now();
    metrics.dbUnreachable.set(1);
    const since = new Date(this.#since).toISOString();
    // pg names some faults only in words ("Connection terminated unexpectedly"): no code then.
    this.#log?.error(
      { code: codeOf(error) ?? null, since },
      `the database cannot be reached since ${since}: ${faultOf(error)}; requests that need it are answered 503 with Retry-After; logged again when it answers`,
    );
    if (this.#ping === undefined) return;
    this.#probe = setInterval(() => void this.#ask(), PROBE_MS);
    this.#probe.unref();
  }

  async #ask(): Promise<void> {
    if (this.#probing || this.#ping === undefined) return;
    this.#probing = true;
    try {
      await this.#ping();
      this.#end();
    } catch {
      // Still unreachable: the next probe asks again.
    } finally {
      this.#probing = false;
    }
  }

  #end(): void {
    if (this.#since === undefined) return;
    const seconds = Math.round((Date.now() - this.#since) / 100) / 10;
    this.#log?.info(
      { unreachable_ms: Date.now() - this.#since, refused: this.#refused },
      `the database answers again after ${seconds} s; ${this.#refused} requests were answered 503 meanwhile`,
    );
    this.stop();
    this.#since = undefined;
    this.#refused = 0;
    this.#told.clear();
    metrics.dbUnreachable.set(0);
  }
}

/** The handle with the outage it reports to: a new one, or that of the handle it stands beside. */
export function withOutage<T extends object>(
  kysely: T,
  outage: DatabaseOutage,
): T & { readonly outage: DatabaseOutage } {
  return Object.assign(kysely, { outage });
}
