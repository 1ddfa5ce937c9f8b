import { Ajv } from 'ajv';
import { isIP } from 'node:net';
import Type, { type Static, type TSchema } from 'typebox';

/**
 * Every setting of rowi, as one schema. Each property names its environment variable and,
 * for the common ones, its `rowi serve` flag; `loadConfig` reads them in that order of
 * precedence (flag, environment, default), checks them against the schema, and freezes the
 * result. Names are part of the contract (README "Configuration"): scripts and deployments rely on them.
 */
const setting = <T extends TSchema>(schema: T, env: string, flag?: string) =>
  Object.assign(schema, { 'x-env': env, ...(flag ? { 'x-flag': flag } : {}) });

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const ConfigSchema = Type.Object({
  host: setting(
    Type.String({
      pattern: '^[A-Za-z0-9.:%_-]{1,253}$',
      default: '127.0.0.1',
      description: 'address to listen on (an IP address or a host name)',
    }),
    'ROWI_HOST',
    'host',
  ),
  port: setting(
    Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: 'TCP port; 0 picks a free one' }),
    'ROWI_PORT',
    'port',
  ),
  data: setting(
    Type.String({ minLength: 1, default: './data/rowi.db', description: 'SQLite database file' }),
    'ROWI_DATA',
    'data',
  ),
  databaseUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^postgres(ql)?://\\S+$',
      'x-error': 'must be a postgres:// (or postgresql://) connection URL',
      'x-secret': true,
      description: 'postgres://user:password@host:5432/database selects PostgreSQL instead of the SQLite file',
    }),
    'ROWI_DATABASE_URL',
    'database-url',
  ),
  databasePoolSize: setting(
    Type.Integer({ minimum: 1, maximum: 1000, default: 10, description: 'PostgreSQL connections each rowi process keeps at most' }),
    'ROWI_DATABASE_POOL_SIZE',
  ),
  databaseTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 600_000,
      default: 5000,
      description: 'milliseconds a request waits for the database (a PostgreSQL connection or statement, SQLite\'s write lock held by another process) before a 503',
    }),
    'ROWI_DATABASE_TIMEOUT',
  ),
  workers: setting(
    Type.Integer({ minimum: 0, maximum: 256, default: 0, description: 'processes of rowi serve sharing the port; 0: one per core' }),
    'ROWI_WORKERS',
    'workers',
  ),
  logLevel: setting(
    Type.Union(
      LOG_LEVELS.map((level) => Type.Literal(level)),
      { default: 'info', description: 'pino log level' },
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
  tlsCert: setting(
    Type.String({ default: '', description: 'PEM certificate (chain) file; with ROWI_TLS_KEY, rowi serves HTTPS and sends HSTS' }),
    'ROWI_TLS_CERT',
    'tls-cert',
  ),
  tlsKey: setting(
    Type.String({ default: '', description: 'PEM private key file of ROWI_TLS_CERT' }),
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
      description: 'origin callers reach rowi at (https://api.example.com); the OAuth issuer; default: the listen address',
    }),
    'ROWI_PUBLIC_URL',
  ),
  tokenLifetime: setting(
    Type.Integer({ minimum: 60, maximum: 86_400, default: 900, description: 'lifetime in seconds of access tokens issued by POST /oauth/token' }),
    'ROWI_TOKEN_LIFETIME',
  ),
  jwtIssuer: setting(
    Type.String({ default: '', pattern: '^$|^https?://\\S+$', description: 'issuer (iss) of external bearer tokens rowi accepts; unset: none' }),
    'ROWI_JWT_ISSUER',
  ),
  jwtAudience: setting(
    Type.String({ default: '', description: 'audience (aud) external bearer tokens must name' }),
    'ROWI_JWT_AUDIENCE',
  ),
  jwtJwksUrl: setting(
    Type.String({ default: '', pattern: '^$|^https?://\\S+$', description: 'JWKS URL of the external issuer (cached; refetched on an unknown kid)' }),
    'ROWI_JWT_JWKS_URL',
  ),
  jwtAlgorithms: setting(
    Type.String({
      default: 'RS256,ES256,PS256,EdDSA',
      pattern: '^(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA)(,(RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|EdDSA))*$',
      'x-error': 'must be a comma-separated list of asymmetric JWS algorithms (RS256, PS256, ES256, EdDSA…)',
      description: 'signature algorithms accepted on external bearer tokens (never none or HS*)',
    }),
    'ROWI_JWT_ALGORITHMS',
  ),
  // Limits: README "Limits".
  rateLimitAnonymous: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 60, description: 'requests per minute per client address without credentials; 0: unlimited' }),
    'ROWI_RATE_LIMIT_ANONYMOUS',
  ),
  rateLimitReader: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 600, description: 'requests per minute per caller with the reader role (a caller\'s own rate_limit wins); 0: unlimited' }),
    'ROWI_RATE_LIMIT_READER',
  ),
  rateLimitEditor: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 1200, description: 'requests per minute per caller with the editor role; 0: unlimited' }),
    'ROWI_RATE_LIMIT_EDITOR',
  ),
  rateLimitAdmin: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 1200, description: 'requests per minute per caller with the admin role; 0: unlimited' }),
    'ROWI_RATE_LIMIT_ADMIN',
  ),
  rateLimitOrdersCreate: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 300, description: 'POST /v1/orders per minute per caller, within its overall budget; 0: unlimited' }),
    'ROWI_RATE_LIMIT_ORDERS_CREATE',
  ),
  authFailureLimit: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000, default: 10, description: 'requests with invalid credentials per minute per client address before it gets 429; 0: unlimited' }),
    'ROWI_AUTH_FAILURE_LIMIT',
  ),
  redisUrl: setting(
    Type.String({
      default: '',
      pattern: '^$|^rediss?://\\S+$',
      'x-error': 'must be a redis:// (or rediss://) URL',
      'x-secret': true,
      description: 'redis://host:6379: rate-limit counters shared by every instance; unset: each instance counts alone',
    }),
    'ROWI_REDIS_URL',
  ),
  headersTimeout: setting(
    Type.Integer({ minimum: 1000, maximum: 600_000, default: 10_000, description: 'milliseconds a client has to send the request line and headers' }),
    'ROWI_HEADERS_TIMEOUT',
  ),
  requestTimeout: setting(
    Type.Integer({ minimum: 1000, maximum: 3_600_000, default: 30_000, description: 'milliseconds a client has to send the whole request, body included' }),
    'ROWI_REQUEST_TIMEOUT',
  ),
  keepAliveTimeout: setting(
    Type.Integer({ minimum: 1000, maximum: 600_000, default: 72_000, description: 'milliseconds an idle kept-alive connection stays open (longer than a load balancer\'s idle timeout)' }),
    'ROWI_KEEP_ALIVE_TIMEOUT',
  ),
  handlerTimeout: setting(
    Type.Integer({ minimum: 100, maximum: 600_000, default: 15_000, description: 'milliseconds a request may take once received before rowi answers 503' }),
    'ROWI_HANDLER_TIMEOUT',
  ),
  maxEventLoopDelay: setting(
    Type.Integer({ minimum: 0, maximum: 60_000, default: 1000, description: 'milliseconds of event-loop lag above which rowi sheds load (503); 0: never' }),
    'ROWI_MAX_EVENT_LOOP_DELAY',
  ),
  maxHeapUsed: setting(
    Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0, description: 'megabytes of V8 heap in use above which rowi sheds load (503); 0: never' }),
    'ROWI_MAX_HEAP_USED',
  ),
  auditFlushInterval: setting(
    Type.Integer({ minimum: 10, maximum: 60_000, default: 1000, description: 'milliseconds between batched writes of the audit trail' }),
    'ROWI_AUDIT_FLUSH_INTERVAL',
  ),
  weatherProvider: setting(
    Type.Union([Type.Literal(''), Type.Literal('open-meteo')], {
      default: '',
      description: 'upstream weather provider asked for the current weather of places with coordinates; empty: off (recorded observations only)',
    }),
    'ROWI_WEATHER_PROVIDER',
  ),
  weatherUrl: setting(
    Type.String({
      default: 'https://api.open-meteo.com',
      pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$',
      'x-error': 'must be an http:// or https:// base URL without query or fragment',
      description: 'base URL of the weather provider (its API paths are appended)',
    }),
    'ROWI_WEATHER_URL',
  ),
  weatherTimeout: setting(
    Type.Integer({ minimum: 100, maximum: 60_000, default: 2000, description: 'milliseconds one call to the weather provider may take, body included, before it counts as timed out (504 when nothing is cached)' }),
    'ROWI_WEATHER_TIMEOUT',
  ),
  weatherCacheTtl: setting(
    Type.Integer({ minimum: 1, maximum: 86_400, default: 600, description: 'seconds a provider answer is served from the cache before the provider is asked again' }),
    'ROWI_WEATHER_CACHE_TTL',
  ),
  weatherStaleLimit: setting(
    Type.Integer({ minimum: 0, maximum: 604_800, default: 86_400, description: 'seconds past its TTL a cached provider answer may still be served (stale) while the provider fails' }),
    'ROWI_WEATHER_STALE_LIMIT',
  ),
  weatherCacheEntries: setting(
    Type.Integer({ minimum: 1, maximum: 1_000_000, default: 10_000, description: 'provider answers each process keeps at most (least recently used go first)' }),
    'ROWI_WEATHER_CACHE_ENTRIES',
  ),
  weatherBreakerFailures: setting(
    Type.Integer({ minimum: 1, maximum: 1000, default: 5, description: 'consecutive failed provider calls that open the circuit breaker' }),
    'ROWI_WEATHER_BREAKER_FAILURES',
  ),
  weatherBreakerCooldown: setting(
    Type.Integer({ minimum: 100, maximum: 3_600_000, default: 30_000, description: 'milliseconds the open circuit breaker stops calling the provider before one trial call' }),
    'ROWI_WEATHER_BREAKER_COOLDOWN',
  ),
  sqliteSynchronous: setting(
    Type.Union([Type.Literal('full'), Type.Literal('normal')], {
      default: 'full',
      description:
        'SQLite synchronous mode: full survives power loss; normal survives a process crash only',
    }),
    'ROWI_SQLITE_SYNCHRONOUS',
  ),
});

export type Config = Readonly<Static<typeof ConfigSchema>>;
export type ConfigKey = keyof Config;

/** A bad setting: the program stops before it listens and exits with code 2 (README "Configuration"). */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

type SettingSchema = TSchema & { 'x-env': string; 'x-flag'?: string; default: unknown; type?: string; description?: string };

const settings = ConfigSchema.properties as unknown as Record<ConfigKey, SettingSchema>;

/** The command-line flags of `rowi serve`, for `node:util` parseArgs. */
export const CONFIG_FLAGS: Record<string, { type: 'string' }> = Object.fromEntries(
  Object.values(settings)
    .filter((schema) => schema['x-flag'])
    .map((schema) => [schema['x-flag'] as string, { type: 'string' as const }]),
);

/** One line per setting, for `rowi --help` and the README's configuration table. */
export function describeSettings(): { env: string; flag?: string; default: unknown; description: string }[] {
  return Object.values(settings).map((schema) => ({
    env: schema['x-env'],
    ...(schema['x-flag'] ? { flag: `--${schema['x-flag']}` } : {}),
    default: schema.default,
    description: String(schema.description ?? ''),
  }));
}

const validator = new Ajv({ allErrors: false, strict: false });

/**
 * Reads every setting from flags (already parsed, by flag name) and the environment. Throws
 * ConfigError naming the first bad setting, its source and the rule it breaks.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  flags: Record<string, string | undefined> = {},
): Config {
  const config: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(settings)) {
    const flag = schema['x-flag'];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const fromEnv = env[schema['x-env']];
    const source = fromFlag !== undefined ? `--${flag}` : schema['x-env'];
    const raw = fromFlag ?? (fromEnv === '' ? undefined : fromEnv);
    if (raw === undefined) {
      config[key] = schema.default;
      continue;
    }
    const value = schema.type === 'integer' ? parseInteger(raw) : raw;
    const check = validator.compile(schema);
    if (!check(value)) {
      throw new ConfigError(
        // A secret (a URL with a password) is never echoed.
        `${source}${(schema as { 'x-secret'?: boolean })['x-secret'] ? '' : `=${JSON.stringify(raw)}`} is not a valid setting: ${explain(schema)}`,
      );
    }
    config[key] = value;
  }
  checkTogether(config as Config);
  return Object.freeze(config) as Config;
}

/** Settings that only mean something together. */
function checkTogether(config: Config): void {
  const groups: [string, string[]][] = [
    ['serving HTTPS', ['ROWI_TLS_CERT', 'ROWI_TLS_KEY']],
    ['accepting external bearer tokens', ['ROWI_JWT_ISSUER', 'ROWI_JWT_AUDIENCE', 'ROWI_JWT_JWKS_URL']],
  ];
  const values: Record<string, string> = {
    ROWI_TLS_CERT: config.tlsCert,
    ROWI_TLS_KEY: config.tlsKey,
    ROWI_JWT_ISSUER: config.jwtIssuer,
    ROWI_JWT_AUDIENCE: config.jwtAudience,
    ROWI_JWT_JWKS_URL: config.jwtJwksUrl,
  };
  for (const entry of config.trustProxy === '' ? [] : config.trustProxy.split(',')) {
    if (!isAddressOrRange(entry)) {
      throw new ConfigError(`ROWI_TRUST_PROXY=${JSON.stringify(config.trustProxy)} is not a valid setting: ${JSON.stringify(entry)} is not an IP address or CIDR range`);
    }
  }
  for (const [purpose, names] of groups) {
    const missing = names.filter((name) => values[name] === '');
    if (missing.length > 0 && missing.length < names.length) {
      throw new ConfigError(`${missing.join(' and ')} must be set too: ${purpose} needs ${names.join(', ')}`);
    }
  }
}

function isAddressOrRange(text: string): boolean {
  const [address = '', prefix, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

function parseInteger(raw: string): number | string {
  return /^-?\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : raw;
}

function explain(schema: SettingSchema): string {
  const rule = schema as unknown as Record<string, unknown>;
  if (typeof rule['x-error'] === 'string') return rule['x-error'];
  if (schema.type === 'integer') return `expected an integer from ${rule.minimum} to ${rule.maximum}`;
  if (Array.isArray(rule.anyOf)) {
    const choices = (rule.anyOf as { const: string }[]).map((option) => option.const);
    return `expected one of ${choices.join(', ')}`;
  }
  return String(schema.description ?? 'invalid value');
}
