import Type, { type TSchema } from 'typebox';

/**
 * rowi's settings, each a schema that names its environment variable and, for the common ones,
 * its `rowi serve` flag (config/config.ts puts them together and reads them). Names are part of the
 * contract (docs/operations.md "Configuration"): scripts and deployments rely on them. This file holds
 * serving and storage, and SQLite's durability; auth.settings.ts tokens and external issuers;
 * limits.settings.ts rate limits, time limits and load shedding;
 * weather.settings.ts the weather provider; events.settings.ts the outbox and its readers.
 */
export const setting = <T extends TSchema>(schema: T, env: string, flag?: string) =>
  Object.assign(schema, { 'x-env': env, ...(flag ? { 'x-flag': flag } : {}) });

/** A web origin as browsers send it: scheme, host (name, IPv4 or [IPv6]) and an optional port. */
const ORIGIN = 'https?://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Where rowi listens, how it logs, and where it keeps its data. */
export const SERVING_SETTINGS = {
  host: setting(
    Type.String({
      pattern: '^[A-Za-z0-9.:%_-]{1,253}$',
      default: '127.0.0.1',
      'x-error': 'must be an IP address or a host name',
      description: 'address to listen on (an IP address or a host name)',
    }),
    'ROWI_HOST',
    'host',
  ),
  port: setting(
    Type.Integer({
      minimum: 0,
      maximum: 65535,
      default: 8080,
      description: 'TCP port; `0` picks a free one (the log says which)',
    }),
    'ROWI_PORT',
    'port',
  ),
  data: setting(
    Type.String({
      minLength: 1,
      default: './data/rowi.db',
      'x-error': 'must be the path of a file',
      description: 'SQLite database file (created, with its folder, on first start)',
    }),
    'ROWI_DATA',
    'data',
  ),
  databaseUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^postgres(ql)?://\\S+$',
      'x-error': 'must be a postgres:// (or postgresql://) connection URL',
      'x-secret': true,
      description:
        '`postgres://user:password@host:5432/database` selects PostgreSQL instead of the SQLite file; `?options=-c%20search_path%3Dname` picks a schema',
    }),
    'ROWI_DATABASE_URL',
    'database-url',
  ),
  databasePoolSize: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 10,
      description: 'PostgreSQL connections each rowi process keeps at most',
    }),
    'ROWI_DATABASE_POOL_SIZE',
  ),
  databaseTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 5000,
      description:
        "milliseconds a request waits for the database (a PostgreSQL connection or statement, SQLite's write lock held by another process) before rowi answers 503 with Retry-After",
    }),
    'ROWI_DATABASE_TIMEOUT',
  ),
  workers: setting(
    Type.Integer({
      minimum: 0,
      maximum: 256,
      default: 0,
      description: 'processes `rowi serve` runs on the port; `0`: one per core, `1`: a single process',
    }),
    'ROWI_WORKERS',
    'workers',
  ),
  logLevel: setting(
    Type.Union(
      LOG_LEVELS.map((level) => Type.Literal(level)),
      {
        default: 'info',
        description: 'log level (pino): `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
      },
    ),
    'ROWI_LOG_LEVEL',
    'log-level',
  ),
  bodyLimit: setting(
    Type.Integer({
      minimum: 1024,
      maximum: 100 * 1024 * 1024,
      default: 1024 * 1024,
      description: 'largest request body accepted, in bytes (413 above it)',
    }),
    'ROWI_BODY_LIMIT',
  ),
  shutdownTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 10_000,
      description: 'milliseconds in-flight requests get to finish after SIGTERM/SIGINT',
    }),
    'ROWI_SHUTDOWN_TIMEOUT',
  ),
  heapGrowingPercent: setting(
    Type.Integer({
      minimum: 0,
      maximum: 300,
      default: 20,
      description:
        "how far, in percent, the JavaScript heap may grow past what its last full collection left alive before the next one; `0`: V8's own rule (up to 4 times: a little less CPU, and up to 100 MB more memory after a long export or import)",
    }),
    'ROWI_HEAP_GROWING_PERCENT',
  ),
  tlsCert: setting(
    Type.String({
      default: '',
      description: 'PEM certificate (chain) file; with `ROWI_TLS_KEY`, rowi serves HTTPS (TLS 1.2+) and sends HSTS',
    }),
    'ROWI_TLS_CERT',
    'tls-cert',
  ),
  tlsKey: setting(
    Type.String({ default: '', description: 'PEM private key file of `ROWI_TLS_CERT`' }),
    'ROWI_TLS_KEY',
    'tls-key',
  ),
  trustProxy: setting(
    Type.String({
      default: '',
      pattern: '^$|^[0-9A-Fa-f.:/]+(,[0-9A-Fa-f.:/]+)*$',
      'x-error': 'must be a comma-separated list of IP addresses or CIDR ranges',
      description: 'comma-separated proxy addresses or CIDR ranges whose X-Forwarded-For/-Proto/-Host are believed',
    }),
    'ROWI_TRUST_PROXY',
  ),
  publicUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^https?://[^/?#\\s]+$',
      'x-error': 'must be an origin: http:// or https://, a host and an optional port, without a path',
      description:
        "the origin callers use (`https://api.example.com`): the OpenAPI document's server and the issuer of rowi's tokens",
      'x-default-text': 'the listen address',
    }),
    'ROWI_PUBLIC_URL',
  ),
  corsOrigins: setting(
    Type.String({
      default: '',
      pattern: `^$|^\\*$|^${ORIGIN}(,${ORIGIN})*$`,
      'x-error': 'must be * or a comma-separated list of origins (https://app.example.com, no path or trailing slash)',
      description:
        "browser origins allowed to call rowi (CORS), comma-separated (`https://app.example.com`), or `*` for any; unset: none, and browsers refuse other sites' scripts (see Browser callers)",
      'x-default-text': 'unset (no CORS)',
    }),
    'ROWI_CORS_ORIGINS',
  ),
};

/** How durable a write to SQLite is before rowi answers it. */
export const DURABILITY_SETTINGS = {
  sqliteSynchronous: setting(
    Type.Union([Type.Literal('full'), Type.Literal('normal')], {
      default: 'full',
      description:
        "SQLite's synchronous mode. `full`: a write acknowledged with 2xx survives a process crash and a power loss; `normal`: a process crash only, for about 10× the commit rate",
    }),
    'ROWI_SQLITE_SYNCHRONOUS',
  ),
  readCache: setting(
    Type.Integer({
      minimum: 0,
      maximum: 4096,
      default: 8,
      description:
        'megabytes of records read by id that each process keeps in memory on SQLite, answered again without a read of the file until a write (of this or any other process) changes them; `0`: none. PostgreSQL keeps none',
    }),
    'ROWI_READ_CACHE',
  ),
};

/**
 * What rowi checks before it starts, beyond each setting's own rule: the environment's other
 * ROWI_ names (config/config.ts), and the SQLite file (db/sqlite-check.ts).
 */
export const START_CHECK_SETTINGS = {
  unknownSettings: setting(
    Type.Union([Type.Literal('refuse'), Type.Literal('warn')], {
      default: 'refuse',
      description:
        "a `ROWI_…` variable that is no setting (a misspelling: `ROWI_PROT`). `refuse`: stop with exit code 2, naming the nearest setting; `warn`: say so on stderr and start. Never settings: `ROWI_KEY` (the examples' key) and the tools' `ROWI_TEST_…`, `ROWI_BENCH_…`, `ROWI_CI_…`",
    }),
    'ROWI_UNKNOWN_SETTINGS',
  ),
  sqliteCheck: setting(
    Type.Union([Type.Literal('quick'), Type.Literal('full'), Type.Literal('off')], {
      default: 'quick',
      description:
        'how a SQLite file is checked for damage before any command uses it. `quick`: SQLite\'s quick_check (a 1.2 GB file: 2 to 3 s from the page cache, 25 s from disk); `full`: integrity_check, indexes too (about 3× as long); `off`: not checked. Damage stops rowi with exit code 2 (docs/backups.md "Damaged database")',
    }),
    'ROWI_SQLITE_CHECK',
  ),
  sqliteCheckWait: setting(
    Type.Integer({
      minimum: 0,
      maximum: 3_600_000,
      default: 10_000,
      description:
        'milliseconds a start waits for that check; past them rowi starts and the check goes on beside it: damage it finds then is treated as damage a request meets (writes refused, `/health/ready` fails)',
    }),
    'ROWI_SQLITE_CHECK_WAIT',
  ),
};
