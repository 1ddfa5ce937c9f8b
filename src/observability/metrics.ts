import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { SeriesHistogram } from './metrics-histogram.js';

/**
 * rowi's Prometheus metrics (docs: docs/operations.md "Metrics"), one set per process, which every layer
 * records into: the HTTP engine its requests, the database its transactions and pool waits, the
 * limits and authentication their refusals, the event streams their connections, the weather client its upstream calls. Served at
 * /metrics (resources/metrics/metrics.routes.ts); with --workers the primary adds up every worker's.
 *
 * Labels are bounded: route templates (never concrete paths), methods, status classes, policy
 * and failure names from rowi's own lists.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
// Gauges named like counters, which Prometheus's naming rules refuse (promtool check metrics);
// nodejs_active_handles, _requests and _resources by type remain, and add up to them.
for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
  registry.removeSingleMetric(name);

/** Requests being served now: a plain number on the hot path, read into its gauge when scraped. */
export const inFlight = { count: 0 };

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export const metrics = {
  requestDuration: new SeriesHistogram({
    name: 'rowi_http_request_duration_seconds',
    help: "Time from a request's arrival to its response, by route template (unmatched for unknown paths), method and status class (2xx…; 4xx also for a client that left first)",
    labelNames: ['route', 'method', 'status_class'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  requestsInFlight: new Gauge({
    name: 'rowi_http_requests_in_flight',
    help: 'Requests being served now',
    registers: [registry],
    collect() {
      this.set(inFlight.count);
    },
  }),
  transactionDuration: new Histogram({
    name: 'rowi_db_transaction_duration_seconds',
    help: 'Units of work (write transactions), from their start to their commit or rollback, by outcome (committed: durable, rolled_back); not the chunks of imports on the import thread (ROWI_IMPORT_THREAD)',
    labelNames: ['outcome'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  poolWait: new Histogram({
    name: 'rowi_db_pool_wait_seconds',
    help: 'Time a PostgreSQL query or transaction waited for a connection of the pool',
    buckets: SECONDS,
    registers: [registry],
  }),
  dbUnreachable: new Gauge({
    name: 'rowi_db_unreachable',
    help: 'Whether this process finds the database unreachable now (1: since its first failure to reach it, until it answers again; 0 otherwise); with --workers the highest of the workers',
    aggregator: 'max',
    registers: [registry],
  }),
  dbUnreachableErrors: new Counter({
    name: 'rowi_db_unreachable_errors_total',
    help: 'Failures to reach the database, by where they were met: request (answered 503), or the background task (audit, outbox, webhooks, imports, retention, api-keys…); the log says once when it becomes unreachable and once when it answers again',
    labelNames: ['source'] as const,
    registers: [registry],
  }),
  rateLimited: new Counter({
    name: 'rowi_rate_limit_rejections_total',
    help: 'Requests refused with 429 by a rate limit, by policy',
    labelNames: ['policy'] as const,
    registers: [registry],
  }),
  authFailures: new Counter({
    name: 'rowi_auth_failures_total',
    help: 'Requests refused by authentication or authorisation, by kind (the problem type: missing-credentials, invalid-credentials, malformed-credentials, insufficient-scope)',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  eventStreamsOpen: new Gauge({
    name: 'rowi_event_streams_open',
    help: 'Event streams whose connection is open (a stream counts until its socket has closed)',
    registers: [registry],
  }),
  eventStreamsEnded: new Counter({
    name: 'rowi_event_streams_ended_total',
    help: 'Event streams whose connection closed, by why: client (it left), slow_reader (it took nothing of ROWI_EVENTS_STREAM_BUFFER unsent for two heartbeat intervals: reset), access (its credential stopped authenticating or lost events:read), shutdown, error',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  webhookThreads: new Gauge({
    name: 'rowi_webhook_threads',
    help: "Webhook delivery threads running (ROWI_WEBHOOK_THREAD=thread): one in the process that holds the webhook dispatcher's lease while an endpoint is enabled, none while none is; summed over --workers",
    registers: [registry],
  }),
  tableRows: new Gauge({
    name: 'rowi_table_rows',
    help: "Rows of a table that grows with use, by table: an estimate (the span of its keys; on PostgreSQL its planner statistics for a table without one), measured after each pruning sweep (every minute), never on a scrape; with --workers the largest of the workers' measurements",
    labelNames: ['table'] as const,
    aggregator: 'max',
    registers: [registry],
  }),
  oldestRowTime: new Gauge({
    name: 'rowi_table_oldest_row_timestamp_seconds',
    help: 'The time of the oldest row of a table that grows with use (Unix seconds), by table, measured after each pruning sweep; no series while the table is empty',
    labelNames: ['table'] as const,
    aggregator: 'max',
    registers: [registry],
  }),
  oldestRowAge: new Gauge({
    name: 'rowi_table_oldest_row_age_seconds',
    help: "Seconds since the time of the oldest row of a table that grows with use, by table (from rowi_table_oldest_row_timestamp_seconds); above the table's retention while a backlog is pruned",
    labelNames: ['table'] as const,
    aggregator: 'min',
    registers: [registry],
    async collect() {
      const now = Date.now() / 1000;
      this.reset();
      for (const { labels, value } of (await metrics.oldestRowTime.get()).values)
        this.set({ table: String(labels.table) }, Math.max(0, now - value));
    },
  }),
  prunedRows: new Counter({
    name: 'rowi_retention_pruned_rows_total',
    help: 'Rows deleted by the background pruning because they were past their retention, by table',
    labelNames: ['table'] as const,
    registers: [registry],
  }),
  auditEventsPending: new Gauge({
    name: 'rowi_audit_events_pending',
    help: 'Audit events recorded and not yet written to the trail (written every ROWI_AUDIT_FLUSH_INTERVAL; they pile up while the database refuses the trail, up to 100,000, then the oldest are dropped)',
    registers: [registry],
    collect() {
      this.set(auditTrailOf?.().pending ?? 0);
    },
  }),
  auditFailingSeconds: new Gauge({
    name: 'rowi_audit_write_failing_seconds',
    help: 'Seconds since writes of the audit trail started to fail (the database refusing every batch: unreachable, its disk full); 0 while they succeed; with --workers the longest of the workers',
    aggregator: 'max',
    registers: [registry],
    collect() {
      const since = auditTrailOf?.().failingSince;
      this.set(since === undefined ? 0 : Math.max(0, (Date.now() - since) / 1000));
    },
  }),
  auditEventsSetAside: new Counter({
    name: 'rowi_audit_events_set_aside_total',
    help: 'Audit events the database refused for their values (the rest of their batch was written): each is in an error line of the log instead',
    registers: [registry],
  }),
  auditEventsDropped: new Counter({
    name: 'rowi_audit_events_dropped_total',
    help: 'Audit events dropped unwritten because 100,000 were waiting while the database refused the trail',
    registers: [registry],
  }),
  readCacheLookups: new Counter({
    name: 'rowi_read_cache_lookups_total',
    help: 'Reads of a record by id on SQLite, by result: hit (answered from memory), miss (read from the file; kept for the next, unless anything was committed meanwhile); ROWI_READ_CACHE',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      const stats = readCacheOf?.();
      if (stats === undefined) return;
      this.reset();
      this.inc({ result: 'hit' }, stats.hits);
      this.inc({ result: 'miss' }, stats.misses);
    },
  }),
  readCacheBytes: new Gauge({
    name: 'rowi_read_cache_bytes',
    help: 'What the records kept by the read cache take, an estimate (at most ROWI_READ_CACHE megabytes a process)',
    registers: [registry],
    collect() {
      this.set(readCacheOf?.()?.bytes ?? 0);
    },
  }),
  upstreamCalls: new Counter({
    name: 'rowi_weather_upstream_calls_total',
    help: 'Calls to the weather provider, by outcome (ok, timeout, bad-answer, unreachable)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  upstreamCache: new Counter({
    name: 'rowi_weather_cache_lookups_total',
    help: 'Lookups of the weather cache, by result (hit: fresh, expired: kept past its TTL, miss: none)',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
  breakerState: new Gauge({
    name: 'rowi_weather_breaker_state',
    help: 'The state of the circuit breaker in front of the weather provider: 1 for the state it is in (closed, open: no calls, half-open: one trial call), 0 for the others; summed over --workers',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const state = breakerOf?.();
      for (const each of BREAKER_STATES) this.set({ state: each }, state === each ? 1 : 0);
    },
  }),
  /** Backups into ROWI_BACKUP_DIR (scheduled or started over HTTP): read from the folder's status file on each scrape, the same in every process. */
  backupLastSuccess: new Gauge({
    name: 'rowi_backup_last_success_timestamp_seconds',
    help: 'When the last backup into ROWI_BACKUP_DIR (scheduled, or started by POST /v1/backups) that was taken and checked whole finished (Unix seconds); 0 before the first, and without ROWI_BACKUP_DIR',
    aggregator: 'max',
    registers: [registry],
    async collect() {
      this.reset();
      const at = (await backupStatusOf?.())?.lastSuccess;
      if (at !== undefined) this.set(at);
    },
  }),
  backupFailures: new Counter({
    name: 'rowi_backup_failures_total',
    help: 'Backups into ROWI_BACKUP_DIR (scheduled, or started by POST /v1/backups) that failed (a full disk, a folder that cannot be made or written, a copy that failed its check), since the folder was first used, plus those of this process whose failure the folder could not record; 0 without ROWI_BACKUP_DIR',
    aggregator: 'max',
    registers: [registry],
    async collect() {
      this.reset();
      const status = await backupStatusOf?.();
      const failures = (status?.failures ?? 0) + unrecordedBackupFailures;
      if (failures > 0) this.inc(failures);
    },
  }),
};

/** Backup failures of this process that the backup folder's status file could not record (the folder unusable). */
let unrecordedBackupFailures = 0;

export function countUnrecordedBackupFailure(): void {
  unrecordedBackupFailures += 1;
}

let backupStatusOf: (() => Promise<{ lastSuccess?: number; failures: number } | undefined>) | undefined;

/** Where the backup metrics read the schedule's outcome (the folder's status file). */
export function watchBackups(read: () => Promise<{ lastSuccess?: number; failures: number } | undefined>): void {
  backupStatusOf = read;
  // The failures the folder could not record are those of the folder watched from now on.
  unrecordedBackupFailures = 0;
}

let auditTrailOf: (() => { pending: number; failingSince: number | undefined }) | undefined;

/** Where the audit trail's metrics read its state (the latest audit log's). */
export function watchAuditTrail(read: () => { pending: number; failingSince: number | undefined }): void {
  auditTrailOf = read;
}

let readCacheOf: (() => { hits: number; misses: number; bytes: number }) | undefined;

/** Where the read cache's metrics read its counts (the latest database handle's). */
export function watchReadCache(read: () => { hits: number; misses: number; bytes: number }): void {
  readCacheOf = read;
}

const BREAKER_STATES = ['closed', 'open', 'half-open'] as const;
let breakerOf: (() => string) | undefined;

/** Where the weather client's breaker state is read when metrics are collected (the latest client's). */
export function watchBreaker(read: () => string): void {
  breakerOf = read;
}

/** Seconds since `start` (a process.hrtime.bigint()). */
export const secondsSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e9;
