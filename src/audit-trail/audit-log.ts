import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { faultOf } from '../observability/logger.js';
import { metrics, watchAuditTrail } from '../observability/metrics.js';
import { codeOf, isRefusedValue } from '../db/driver-errors.js';
import { storableOrNull, storableText } from '../db/storable-text.js';
import type { Storage } from '../db/connect.js';
import { unitOfWork } from '../db/unit-of-work.js';
import type { Insertable } from 'kysely';
import type { AuditEventsTable, Db, Trx } from '../db/database.js';
import { AUDIT_COLUMNS, insertAuditEvents } from './audit.repository.js';
import { pathOf } from '../http/problem.js';
import { isProbe } from '../http/probes.js';

/** One request, as recorded: `at` in epoch milliseconds until it is written. */
export type AuditRecord = Omit<Insertable<AuditEventsTable>, 'at'> & { at: number };

const COLUMNS = AUDIT_COLUMNS satisfies readonly (keyof AuditRecord)[];
const WIDTH = COLUMNS.length;

/**
 * A record's values in COLUMNS order, each read by its name: a loop over the names reads them by
 * a key that changes every time (V8's slowest, megamorphic, property load), which an import's
 * thousands of records a second measurably paid for. The texts a request brought (its path, the
 * record its URL names, its id, its address, the name its credential gave) are made storable:
 * a `%00` in a URL must not make a batch of the trail unwritable on PostgreSQL.
 */
function pushValues(values: unknown[], record: AuditRecord): void {
  values.push(
    record.at,
    storableText(record.request_id),
    record.caller_id ?? null,
    storableOrNull(record.caller_name),
    record.credential ?? null,
    record.user_id ?? null,
    record.method,
    storableText(record.path),
    record.resource ?? null,
    storableOrNull(record.record_id),
    record.action ?? null,
    record.status,
    record.duration_ms,
    storableOrNull(record.client_ip),
  );
}

/**
 * A batch is handed to the writer when this many events wait, before the flush interval ends:
 * under load that is many small batches (about 50 KB of values each) which die young, rather
 * than one array a second that outlives the young generation and has to be marked and moved.
 */
const FLUSH_AT = 512;

/** Past this many unwritten events (the database is failing), the oldest are dropped and logged. */
const MAX_PENDING = 100_000;

/**
 * Where batches go: `values` holds the rows' values one after another in COLUMNS order (a flat
 * array is cheap to build and to hand to another thread), `at` in epoch milliseconds.
 */
export interface AuditWriter {
  write(values: unknown[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * Where the trail is written: through the unit of work, like every write (db/unit-of-work.ts), so
 * that on SQLite its batches join the writer's group commits instead of competing with them for
 * the file's one write lock.
 */
export function auditWriterFor(storage: Pick<Storage, 'db'>): AuditWriter {
  return new KyselyAuditWriter(storage.db);
}

/** What the trail's writing comes to now, for the readiness probe and the metrics. */
export interface AuditTrailState {
  /** Events recorded and not yet written. */
  pending: number;
  /** Since when (epoch milliseconds) writes of the trail have failed; undefined while they succeed. */
  failingSince: number | undefined;
}

/**
 * The audit trail (docs/security.md): one event per request, allowed or refused. Events are buffered in
 * memory and written in multi-row inserts every `flushInterval` ms (or sooner when many are
 * waiting), so a request never waits on an audit write; closing writes whatever is pending.
 *
 * A batch the database refuses never holds up the ones after it. Refused for its values (one
 * event's text the database cannot hold), it is split until the events at fault are alone; those
 * are logged in full and counted instead (set aside), the others written. Refused whole (the
 * database unreachable, its disk full), it is kept, within MAX_PENDING, and written when the
 * database takes it again; meanwhile the readiness probe and the metrics say since when.
 */
export class AuditLog {
  readonly #writer: AuditWriter;
  readonly #log: FastifyBaseLogger;
  #pending: unknown[] = [];
  /** Events of the batch being written now: still waiting, for the probe and the metrics. */
  #writing = 0;
  #flushing: Promise<void> = Promise.resolve();
  #failingSince: number | undefined;
  readonly #timer: NodeJS.Timeout;

  constructor(writer: AuditWriter, log: FastifyBaseLogger, flushInterval: number) {
    this.#writer = writer;
    this.#log = log;
    this.#timer = setInterval(() => void this.flush(), flushInterval);
    this.#timer.unref();
    watchAuditTrail(() => this.state());
  }

  record(event: AuditRecord): void {
    pushValues(this.#pending, event);
    if (this.#pending.length === FLUSH_AT * WIDTH) void this.flush();
  }

  state(): AuditTrailState {
    return { pending: this.#pending.length / WIDTH + this.#writing, failingSince: this.#failingSince };
  }

  /** Writes every pending event; concurrent calls queue behind one another. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
    await this.#writer.close();
    // Nothing is left to try again: what the database would not take is lost, and said so.
    if (this.#pending.length > 0)
      this.#log.error(
        { lost: this.#pending.length / WIDTH },
        `closing with ${this.#pending.length / WIDTH} audit events the database did not take: they are lost`,
      );
  }

  async #write(): Promise<void> {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    this.#writing = batch.length / WIDTH;
    const { kept, error } = await this.#writeWhatCan(batch).finally(() => (this.#writing = 0));
    if (kept.length === 0) {
      if (this.#failingSince !== undefined) {
        this.#log.info({ failed_for_ms: Date.now() - this.#failingSince }, 'the audit trail is written again');
        this.#failingSince = undefined;
      }
      return;
    }
    // Keep the events for the next attempt, within a bound.
    this.#pending = kept.concat(this.#pending);
    const dropped = Math.max(0, this.#pending.length / WIDTH - MAX_PENDING);
    if (dropped > 0) {
      this.#pending.splice(0, dropped * WIDTH);
      metrics.auditEventsDropped.inc(dropped);
    }
    // Said once when writing starts to fail (a full disk fails every flush), and when events are lost;
    // the driver's stack says nothing an operator acts on, and is there at debug level.
    if (this.#failingSince === undefined || dropped > 0) {
      this.#log.error(
        { code: codeOf(error), pending: this.#pending.length / WIDTH, dropped },
        `could not write the audit trail: ${faultOf(error)}; its events are kept and written once the database takes them`,
      );
      this.#log.debug({ err: error }, 'the audit trail could not be written');
    }
    this.#failingSince ??= Date.now();
  }

  /**
   * Writes the batch; one refused for its values is split in halves until the events at fault are
   * alone, which are set aside. Answers what is left to write later (in order) and why: the rest
   * of the batch from the first part the database refused whole.
   */
  async #writeWhatCan(batch: unknown[]): Promise<{ kept: unknown[]; error?: unknown }> {
    try {
      await this.#writer.write(batch);
      return { kept: [] };
    } catch (error) {
      if (!isRefusedValue(error)) return { kept: batch, error };
      const rows = batch.length / WIDTH;
      if (rows === 1) {
        this.#setAsideEvent(batch, error);
        return { kept: [] };
      }
      const half = Math.ceil(rows / 2) * WIDTH;
      const first = await this.#writeWhatCan(batch.slice(0, half));
      if (first.kept.length > 0) return { kept: first.kept.concat(batch.slice(half)), error: first.error };
      return this.#writeWhatCan(batch.slice(half));
    }
  }

  /** An event the database will never take: in the log, whole, where it is kept instead; and counted. */
  #setAsideEvent(values: unknown[], error: unknown): void {
    metrics.auditEventsSetAside.inc();
    const event = Object.fromEntries(COLUMNS.map((column, index) => [column, values[index]]));
    this.#log.error(
      { audit_event: event, code: codeOf(error) },
      `an audit event was refused by the database (${faultOf(error)}): it is kept in this log line instead`,
    );
  }
}

/** Writes a batch as one unit of work, in multi-row inserts. */
export class KyselyAuditWriter implements AuditWriter {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async write(values: unknown[]): Promise<void> {
    // The trail is written a second after its requests anyway: its batches need not wait for the disk.
    await unitOfWork(this.#db, (trx) => insertValues(trx, values), { flush: 'later' });
  }

  async close(): Promise<void> {}
}

/** Rows of flat values (COLUMNS order, `at` in epoch milliseconds), `at` written as a timestamp. */
async function insertValues(trx: Trx, values: unknown[]): Promise<void> {
  // An import's records share one time: each distinct one is formatted once.
  let lastAt: number | undefined;
  let lastText = '';
  for (let index = COLUMNS.indexOf('at'); index < values.length; index += WIDTH) {
    const time = values[index] as number;
    if (time !== lastAt) [lastAt, lastText] = [time, new Date(time).toISOString()];
    values[index] = lastText;
  }
  await insertAuditEvents(trx, values);
}

/**
 * Records written in the caller's transaction rather than buffered: the entries of a batch
 * (engine/batches/batch.ts), each recorded as the single request it stands for, commit with the
 * changes they record or vanish with them.
 */
export async function recordInTransaction(trx: Trx, records: readonly AuditRecord[]): Promise<void> {
  const values: unknown[] = [];
  for (const record of records) pushValues(values, record);
  await insertValues(trx, values);
}

/** The action of a request to a public route or an unknown path, which declares none. */
const ACTION_OF_METHOD: Record<string, string> = {
  GET: 'read',
  HEAD: 'read',
  OPTIONS: 'read',
  POST: 'create',
  PUT: 'update',
  PATCH: 'update',
  DELETE: 'delete',
};

/**
 * Records every request when its response is done (with `reads: false`, ROWI_AUDIT_READS=false,
 * only writes and refusals: a safe method answered below 400 is left out). The path is recorded
 * without its query string, and nothing of the credentials but the caller they resolved to.
 * Returns what records a request its client abandoned before its answer (no response is done for
 * it: http/request-metrics.ts tells of it), with the status it ended with (499: no answer begun).
 */
export function registerAudit(
  app: FastifyInstance,
  audit: AuditLog,
  { reads }: { reads: boolean },
): (request: FastifyRequest, reply: FastifyReply, status: number) => void {
  const recordRequest = (request: FastifyRequest, reply: FastifyReply, status: number) => {
    if (!reads && status < 400 && ACTION_OF_METHOD[request.method] === 'read') return;
    // Set by the route's authentication; a request refused before it (406, credentials in the
    // URL, 503 while draining) finds its route's permission the slower way.
    let permission = request.permission;
    if (permission === null) {
      if (isProbe(request)) return;
      permission = request.routeOptions.config.permission ?? null;
    }
    const access = request.context?.access;
    const recordId = permission === null || permission.scope === 'public' ? undefined : lastParameterOf(request.params);
    const elapsed = reply.elapsedTime;
    audit.record({
      at: Date.now() - elapsed,
      request_id: request.id,
      caller_id: access?.callerId ?? null,
      caller_name: access?.name ?? null,
      credential: access?.credential ?? null,
      user_id: access?.userId ?? null,
      method: request.method,
      path: pathOf(request),
      resource: permission?.resource ?? null,
      record_id: recordId === undefined ? null : String(recordId).slice(0, 256),
      action: permission?.action ?? ACTION_OF_METHOD[request.method] ?? null,
      status,
      duration_ms: Math.round(elapsed * 100) / 100,
      client_ip: request.ip,
    });
  };
  app.addHook('onResponse', (request, reply, done) => {
    recordRequest(request, reply, reply.statusCode);
    done();
  });
  app.addHook('onClose', async () => audit.close());
  return recordRequest;
}

/**
 * The record a request addresses: the last parameter of its route's path (`/v1/users/:id` → id,
 * `/v1/callers/:id/keys/:key_id` → key_id, `/v1/weather/:place` → place), on a route that needs
 * a permission; none on a collection or a public route. Fastify keeps parameters in path order.
 */
function lastParameterOf(params: unknown): unknown {
  if (params === null || typeof params !== 'object') return undefined;
  let last: unknown;
  for (const key in params) last = (params as Record<string, unknown>)[key];
  return last;
}
