import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { CompiledQuery } from 'kysely';
import type { Db, Executor } from '../db/database.js';
import type { Insertable } from 'kysely';
import type { AuditEventsTable } from '../db/database.js';
import { pathOf } from '../http/problem.js';

type AuditEvent = Insertable<AuditEventsTable>;

/** Rows per INSERT: well under SQLite's 32,766 and PostgreSQL's 65,535 bound parameters. */
const ROWS_PER_INSERT = 256;

const COLUMNS = [
  'at', 'request_id', 'caller_id', 'caller_name', 'credential', 'method', 'path',
  'resource', 'record_id', 'action', 'status', 'duration_ms', 'client_ip',
] as const satisfies readonly (keyof AuditEvent)[];

/**
 * Multi-row inserts of 256, 128, … 1 rows, each built and compiled by Kysely once per dialect:
 * under load thousands of events a second are written, and building a 256-row insert every
 * time would cost more than storing it. The SQL does not depend on the values; the parameters
 * are the rows' values, row by row, in COLUMNS order.
 */
const compiledInserts = new WeakMap<object, Map<number, CompiledQuery>>();

function insertOf(db: Executor, size: number): CompiledQuery {
  const { adapter } = db.getExecutor();
  let bySize = compiledInserts.get(adapter);
  if (bySize === undefined) compiledInserts.set(adapter, (bySize = new Map()));
  let compiled = bySize.get(size);
  if (compiled === undefined) {
    const row = Object.fromEntries(COLUMNS.map((column) => [column, null])) as unknown as AuditEvent;
    compiled = db.insertInto('audit_events').values(Array.from({ length: size }, () => row)).compile();
    bySize.set(size, compiled);
  }
  return compiled;
}
/** Past this many unwritten events (the database is failing), the oldest are dropped and logged. */
const MAX_PENDING = 100_000;

const ACTION_OF_METHOD: Record<string, string> = { GET: 'read', HEAD: 'read', OPTIONS: 'read', POST: 'create', PUT: 'update', PATCH: 'update', DELETE: 'delete' };

/**
 * The audit trail (SPEC §5): one event per request, allowed or refused. Events are buffered in
 * memory and written in multi-row inserts every `flushInterval` ms (or sooner when many are
 * waiting), so a request never waits on an audit write; closing writes whatever is pending.
 */
export class AuditLog {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  #pending: AuditEvent[] = [];
  #flushing: Promise<void> = Promise.resolve();
  readonly #timer: NodeJS.Timeout;

  constructor(db: Db, log: FastifyBaseLogger, flushInterval: number) {
    this.#db = db;
    this.#log = log;
    this.#timer = setInterval(() => void this.flush(), flushInterval);
    this.#timer.unref();
  }

  record(event: AuditEvent): void {
    this.#pending.push(event);
    if (this.#pending.length === ROWS_PER_INSERT * 4) void this.flush();
  }

  /** Writes every pending event; concurrent calls queue behind one another. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  async #write(): Promise<void> {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    try {
      await this.#db.transaction().execute(async (trx) => {
        let start = 0;
        while (start < batch.length) {
          const size = 2 ** Math.min(8, Math.floor(Math.log2(batch.length - start)));
          const parameters: unknown[] = new Array(size * COLUMNS.length);
          let at = 0;
          for (let row = start; row < start + size; row++) {
            const event = batch[row]!;
            for (const column of COLUMNS) parameters[at++] = event[column] ?? null;
          }
          await trx.executeQuery({ ...insertOf(trx, size), parameters });
          start += size;
        }
      });
    } catch (error) {
      // Keep the events for the next attempt, within a bound.
      this.#pending = [...batch, ...this.#pending];
      const dropped = this.#pending.length - MAX_PENDING;
      if (dropped > 0) this.#pending.splice(0, dropped);
      this.#log.error({ err: error, pending: this.#pending.length, dropped: Math.max(0, dropped) }, 'could not write the audit trail');
    }
  }
}

/**
 * Records every request when its response is done. The path is recorded without its query
 * string, and nothing of the credentials but the caller they resolved to.
 */
export function registerAudit(app: FastifyInstance, audit: AuditLog): void {
  app.addHook('onResponse', (request, reply, done) => {
    const permission = request.routeOptions.config.permission;
    const scope = permission?.scope;
    const [resource, action] = scope !== undefined && scope !== 'public' ? scope.split(':') : [null, ACTION_OF_METHOD[request.method] ?? null];
    const principal = request.principal;
    const params = request.params as Record<string, unknown> | undefined;
    const recordId = params?.key_id ?? params?.id ?? params?.place;
    const elapsed = reply.elapsedTime;
    audit.record({
      at: new Date(Date.now() - elapsed).toISOString(),
      request_id: request.id,
      caller_id: principal?.callerId ?? null,
      caller_name: principal?.name ?? null,
      credential: principal?.credential ?? null,
      method: request.method,
      path: pathOf(request),
      resource: resource ?? null,
      record_id: recordId === undefined ? null : String(recordId).slice(0, 256),
      action: action ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(elapsed * 100) / 100,
      client_ip: request.ip,
    });
    done();
  });
  app.addHook('onClose', async () => audit.close());
}
