import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Type from 'typebox';
import { setting } from './serving.settings.js';

/**
 * The limits rowi keeps to (docs/limits.md, and `GET /v1/limits` for a caller): rate
 * limits and where they are counted, time limits, load shedding, and the audit trail's flush.
 */
export const LIMIT_SETTINGS = {
  rateLimitAnonymous: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 60,
      description: 'requests per minute per client address without credentials; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ANONYMOUS',
  ),
  rateLimitReader: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 600,
      description:
        "requests per minute per caller with the reader role (a caller's own `rate_limit` wins); `0`: unlimited",
    }),
    'ROWI_RATE_LIMIT_READER',
  ),
  rateLimitEditor: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 1200,
      description: 'requests per minute per caller with the editor role; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_EDITOR',
  ),
  rateLimitAdmin: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 1200,
      description: 'requests per minute per caller with the admin role; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ADMIN',
  ),
  rateLimitOrdersCreate: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 300,
      description:
        'orders placed per minute per caller (`POST /v1/orders`, and each order of a batch or an import, which waits for it), within its overall budget; `0`: unlimited',
    }),
    'ROWI_RATE_LIMIT_ORDERS_CREATE',
  ),
  authFailureLimit: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 10,
      description:
        'requests with invalid credentials (a key, a token, or a client secret by HTTP Basic or form) per minute per client address, and per API key or client id they name, before those get 429 (a credential proven valid is still served: docs/security.md); `0`: unlimited',
    }),
    'ROWI_AUTH_FAILURE_LIMIT',
  ),
  redisUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^rediss?://\\S+$',
      'x-error': 'must be a redis:// (or rediss://) URL',
      'x-secret': true,
      description:
        '`redis://host:6379`: rate-limit counters shared by every instance; unset: each instance counts alone',
    }),
    'ROWI_REDIS_URL',
  ),
  headersTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 600_000,
      default: 10_000,
      description: 'milliseconds a client has to send the request line and headers',
    }),
    'ROWI_HEADERS_TIMEOUT',
  ),
  requestTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 3_600_000,
      default: 30_000,
      description: 'milliseconds a client has to send the whole request, body included',
    }),
    'ROWI_REQUEST_TIMEOUT',
  ),
  keepAliveTimeout: setting(
    Type.Integer({
      minimum: 1000,
      maximum: 600_000,
      default: 72_000,
      description: "milliseconds an idle kept-alive connection stays open (longer than a load balancer's idle timeout)",
    }),
    'ROWI_KEEP_ALIVE_TIMEOUT',
  ),
  handlerTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 15_000,
      description: 'milliseconds a request may take once received before rowi answers 503',
    }),
    'ROWI_HANDLER_TIMEOUT',
  ),
  maxEventLoopDelay: setting(
    Type.Integer({
      minimum: 0,
      maximum: 60_000,
      default: 1000,
      description: 'milliseconds of event-loop lag above which rowi sheds load (503); `0`: never',
    }),
    'ROWI_MAX_EVENT_LOOP_DELAY',
  ),
  maxHeapUsed: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 0,
      description: 'megabytes of V8 heap in use above which rowi sheds load (503); `0`: never',
    }),
    'ROWI_MAX_HEAP_USED',
  ),
  batchMax: setting(
    Type.Integer({
      minimum: 1,
      maximum: 10_000,
      default: 1000,
      description:
        'entries one batch request (`POST /v1/<collection>/batch`) may hold at most; more is 413 `batch-too-large`',
    }),
    'ROWI_BATCH_MAX',
  ),
  importMaxBytes: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1_099_511_627_776,
      default: 1_073_741_824,
      description:
        'bytes one imported file (`POST /v1/<collection>/import`) may hold at most (1 GiB by default); more is 413 `import-too-large`, and nothing is kept of it',
    }),
    'ROWI_IMPORT_MAX_BYTES',
  ),
  importConcurrency: setting(
    Type.Integer({
      minimum: 1,
      maximum: 64,
      default: 2,
      description:
        'imports that run at once in the whole deployment (counted in the database, so across `--workers` and instances); others wait `queued`, and each free turn goes to the caller running the fewest, then to the one whose last import started longest ago',
    }),
    'ROWI_IMPORT_CONCURRENCY',
  ),
  importCallerConcurrency: setting(
    Type.Integer({
      minimum: 1,
      maximum: 64,
      default: 1,
      description:
        "imports one caller may run at once (within `ROWI_IMPORT_CONCURRENCY`): its next ones wait `queued`, and another caller's import may take the free turn",
    }),
    'ROWI_IMPORT_CALLER_CONCURRENCY',
  ),
  importQueueMax: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 10,
      description:
        'imports one caller may have waiting (`queued`) in the whole deployment; one more is 429 `import-queue-full` with Retry-After, before its file is read; `0`: unlimited',
    }),
    'ROWI_IMPORT_QUEUE_MAX',
  ),
  importQueueBytes: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_099_511_627_776,
      default: 2_147_483_648,
      description:
        "bytes the files of one caller's waiting (`queued`) imports may hold in the whole deployment (2 GiB by default); a file that would pass it is 429 `import-queue-full` (413 `import-too-large` when it alone is larger); `0`: unlimited",
    }),
    'ROWI_IMPORT_QUEUE_BYTES',
  ),
  importSpoolBytes: setting(
    Type.Integer({
      minimum: 0,
      maximum: 1_099_511_627_776,
      default: 4_294_967_296,
      description:
        'bytes the files of every waiting or running import may hold together, in the whole deployment (counted in the database; 4 GiB by default): a file that would pass it is 507 `import-spool-full` with Retry-After, and nothing of it is kept; `0`: unlimited',
    }),
    'ROWI_IMPORT_SPOOL_BYTES',
  ),
  importThread: setting(
    Type.Union([Type.Literal('auto'), Type.Literal('thread'), Type.Literal('main')], {
      default: 'auto',
      description:
        "`thread`: imports run on a thread of their own, with its own database connection, started by a process's first import (36-40 MB more memory): they never take the event loop that answers requests (docs/bulk.md); `main`: on that event loop, between requests; `auto` (the default): `thread` on SQLite, `main` on PostgreSQL",
    }),
    'ROWI_IMPORT_THREAD',
  ),
  importRetention: setting(
    Type.Integer({
      minimum: 60,
      maximum: 315_360_000,
      default: 604_800,
      description:
        'seconds a finished operation (an import, with its row errors, or a backup over HTTP) is kept after it ended before it is pruned (7 days by default); queued and running ones are never pruned',
    }),
    'ROWI_IMPORT_RETENTION',
  ),
  importDirectory: setting(
    Type.String({
      maxLength: 4096,
      default: '',
      description:
        "directory where uploaded files wait for their import (deleted when it ends); empty: a folder of the database's own under `rowi-imports` in the system temporary directory",
    }),
    'ROWI_IMPORT_DIRECTORY',
  ),
  exportMaxRows: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1_000_000_000,
      default: 10_000_000,
      description:
        'records one export (a list asked for as `text/csv` or `application/x-ndjson`) may hold at most; a filtered collection holding more is refused upfront with 422 `export-too-large`',
    }),
    'ROWI_EXPORT_MAX_ROWS',
  ),
  exportStallTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 30_000,
      description:
        'milliseconds an export waits for its client to take the next chunk (about 256 KB) before it closes the connection; nothing is held open meanwhile',
    }),
    'ROWI_EXPORT_STALL_TIMEOUT',
  ),
  auditFlushInterval: setting(
    Type.Integer({
      minimum: 10,
      maximum: 60_000,
      default: 1000,
      description: 'milliseconds between batched writes of the audit trail',
    }),
    'ROWI_AUDIT_FLUSH_INTERVAL',
  ),
  auditRetention: setting(
    Type.Integer({
      minimum: 60,
      maximum: 315_360_000,
      default: 7_776_000,
      description:
        'seconds the audit trail keeps an event before it is pruned in the background, in small batches (90 days by default)',
    }),
    'ROWI_AUDIT_RETENTION',
  ),
  auditReads: setting(
    Type.Union([Type.Literal('true'), Type.Literal('false')], {
      default: 'true',
      'x-error': 'must be true or false',
      description:
        '`true`: the audit trail records every request; `false`: writes and refusals only (a GET, HEAD or OPTIONS answered below 400 is not recorded)',
    }),
    'ROWI_AUDIT_READS',
  ),
};

/**
 * Where uploads wait for their import: ROWI_IMPORT_DIRECTORY, or a folder of the database's own
 * under `rowi-imports` in the system's temporary directory. A file is named by its operation's id,
 * which is unique only within one database: two rowi on one machine with different databases
 * (each with an operation 1) must never read or remove each other's uploads, while the workers of
 * one rowi, and its import thread, must find the same folder. So the folder is named by what the
 * database is: the SQLite file's absolute path, the PostgreSQL URL without its password, or the
 * process for a database in memory.
 */
export function importDirectoryOf(config: { importDirectory: string; data: string; databaseUrl: string }): string {
  if (config.importDirectory !== '') return config.importDirectory;
  return join(tmpdir(), 'rowi-imports', databaseKey(config));
}

function databaseKey(config: { data: string; databaseUrl: string }): string {
  let identity: string;
  if (config.databaseUrl !== '') {
    const url = new URL(config.databaseUrl);
    url.password = '';
    identity = `postgresql:${url.href}`;
  } else if (config.data === ':memory:' || config.data === '') identity = `memory:${process.pid}`;
  else identity = `sqlite:${resolve(config.data)}`;
  return createHash('sha256').update(identity).digest('hex').slice(0, 16);
}
