import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { Principal } from '../auth/principals.js';
import type { Config } from '../config.js';
import type { Role } from '../db/database.js';
import { AppError } from '../errors.js';

/**
 * Per-caller rate limits (SPEC §7), counted with GCRA (the generic cell rate algorithm, a token
 * bucket kept as one timestamp per key): a caller may spend its whole quota at once, then one
 * request every window/quota. Counted after authentication, so per caller, not per address;
 * requests without credentials are counted per client address. Every counted response says
 * where the caller stands (IETF httpapi rate-limit headers, draft 09):
 *
 *   RateLimit-Policy: "caller";q=600;w=60
 *   RateLimit: "caller";r=599;t=1
 *
 * q is the quota per window w (seconds); r what remains, t the seconds until the quota is whole
 * again. Over it: 429 `rate-limited` with Retry-After. POST /v1/orders also spends from a tighter
 * "orders-create" budget. With ROWI_REDIS_URL the counters live in Redis, shared by every
 * instance (one Lua script per request, so no read-then-write race, timed by Redis's clock);
 * while Redis cannot be reached, each instance counts alone, and says so (log, /health/ready).
 */

const WINDOW_S = 60;
const WINDOW_MS = WINDOW_S * 1000;
/** Keys kept in memory at most; the stalest go first (a flood of addresses cannot grow memory). */
const MEMORY_KEYS = 100_000;
/** How long a Redis call may take before this request is counted in memory instead. */
const REDIS_TIMEOUT_MS = 250;

export interface Policy {
  name: 'caller' | 'address' | 'orders-create' | 'failed-auth';
  quota: number;
  windowSeconds: number;
}

export interface Decision {
  allowed: boolean;
  remaining: number;
  /** Milliseconds until the whole quota is available again. */
  resetMs: number;
  /** Milliseconds until one more request is allowed (0 when allowed). */
  retryMs: number;
}

interface Store {
  take(key: string, quota: number, windowMs: number): Decision | Promise<Decision>;
}

/** GCRA over a Map of theoretical arrival times (milliseconds). */
export class MemoryStore implements Store {
  readonly #arrivals = new Map<string, number>();

  take(key: string, quota: number, windowMs: number, now = Date.now()): Decision {
    const interval = windowMs / quota;
    const stored = this.#arrivals.get(key);
    const arrival = stored === undefined || stored < now ? now : stored;
    const next = arrival + interval;
    const allowedAt = next - windowMs;
    if (now < allowedAt) return { allowed: false, remaining: 0, resetMs: Math.ceil(arrival - now), retryMs: Math.ceil(allowedAt - now) };
    // Re-inserting moves the key to the end: the Map's first keys are the stalest.
    this.#arrivals.delete(key);
    if (this.#arrivals.size >= MEMORY_KEYS) this.#arrivals.delete(this.#arrivals.keys().next().value as string);
    this.#arrivals.set(key, next);
    return { allowed: true, remaining: Math.floor((windowMs - (next - now)) / interval), resetMs: Math.ceil(next - now), retryMs: 0 };
  }

  /** Whether a request now would be refused, without spending from the bucket. */
  wouldRefuse(key: string, quota: number, windowMs: number, now = Date.now()): boolean {
    const stored = this.#arrivals.get(key);
    return stored !== undefined && now < stored + windowMs / quota - windowMs;
  }

  /** Forgets keys whose bucket is full again (they hold no information). */
  sweep(now = Date.now()): void {
    for (const [key, arrival] of this.#arrivals) if (arrival <= now) this.#arrivals.delete(key);
  }
}

/** The same algorithm in Redis, atomically, on Redis's clock (instances' clocks may differ). */
const GCRA_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local arrival = tonumber(redis.call('GET', KEYS[1]) or '0')
if arrival < now then arrival = now end
local nextArrival = arrival + interval
local allowedAt = nextArrival - window
if now < allowedAt then
  return {0, 0, math.ceil(arrival - now), math.ceil(allowedAt - now)}
end
redis.call('SET', KEYS[1], string.format('%.3f', nextArrival), 'PX', math.ceil(nextArrival - now) + 1000)
return {1, math.floor((window - (nextArrival - now)) / interval), math.ceil(nextArrival - now), 0}
`;

type RedisWithGcra = Redis & { gcra(key: string, interval: string, window: string): Promise<[number, number, number, number]> };

/** Redis counters, falling back to the memory store (per instance) while Redis cannot answer. */
export class RedisStore implements Store {
  readonly #redis: RedisWithGcra;
  readonly #fallback: MemoryStore;
  readonly #log: FastifyBaseLogger;
  #degradedSince: number | undefined;

  readonly #prefix: string;

  /** `namespace` keeps apart the counters of rowi deployments (databases) that share one Redis. */
  constructor(url: string, namespace: string, fallback: MemoryStore, log: FastifyBaseLogger) {
    this.#prefix = `rowi:rl:${createHash('sha256').update(namespace).digest('base64url').slice(0, 12)}:`;
    this.#fallback = fallback;
    this.#log = log;
    this.#redis = new Redis(url, {
      // Never queue commands while disconnected: a request must not wait for Redis to come back.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 1000,
      commandTimeout: REDIS_TIMEOUT_MS,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
      lazyConnect: false,
    }) as RedisWithGcra;
    this.#redis.defineCommand('gcra', { numberOfKeys: 1, lua: GCRA_SCRIPT });
    this.#redis.on('error', (error) => this.#degrade(error));
    this.#redis.on('ready', () => {
      if (this.#degradedSince !== undefined) this.#log.info('Redis answers again: rate limits are shared between instances again');
      this.#degradedSince = undefined;
    });
  }

  /** Waits (at most `ms`) for the first connection, so that a start does not count its first requests alone. */
  async connected(ms: number): Promise<void> {
    if (this.#redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#redis.once('ready', done);
      this.#redis.once('error', done);
    });
  }

  /** Undefined while shared; else since when each instance has counted alone. */
  get degradedSince(): number | undefined {
    return this.#degradedSince;
  }

  async take(key: string, quota: number, windowMs: number): Promise<Decision> {
    try {
      const [allowed, remaining, resetMs, retryMs] = await this.#redis.gcra(`${this.#prefix}${key}`, String(windowMs / quota), String(windowMs));
      return { allowed: allowed === 1, remaining, resetMs, retryMs };
    } catch (error) {
      this.#degrade(error);
      return this.#fallback.take(key, quota, windowMs);
    }
  }

  #degrade(error: unknown): void {
    if (this.#degradedSince !== undefined) return;
    this.#degradedSince = Date.now();
    this.#log.warn({ err: error }, 'Redis cannot be reached: each instance counts rate limits alone until it is back');
  }

  async close(): Promise<void> {
    this.#redis.disconnect();
  }
}

/** The limits a request is counted against; empty when none applies. */
export class RateLimiter {
  readonly #memory = new MemoryStore();
  readonly #redis: RedisStore | undefined;
  readonly #config: Config;
  readonly #sweep: NodeJS.Timeout;

  /** `namespace`: what identifies the database (instances on one database share their counters). */
  constructor(config: Config, namespace: string, log: FastifyBaseLogger) {
    this.#config = config;
    this.#redis = config.redisUrl === '' ? undefined : new RedisStore(config.redisUrl, namespace, this.#memory, log);
    this.#sweep = setInterval(() => this.#memory.sweep(), WINDOW_MS);
    this.#sweep.unref();
  }

  /** Resolves once Redis (if any) answers, or has had `ms` to. */
  async connected(ms = 1000): Promise<void> {
    await this.#redis?.connected(ms);
  }

  /** How the counters are kept, for /health/ready and /v1/limits. */
  get sharing(): 'instance' | 'redis' | 'instance (Redis unreachable)' {
    if (this.#redis === undefined) return 'instance';
    return this.#redis.degradedSince === undefined ? 'redis' : 'instance (Redis unreachable)';
  }

  /** The caller's (or the address's) own policy. */
  policyOf(principal: Principal | null): Policy | undefined {
    const quota = principal === null ? this.#config.rateLimitAnonymous : principal.rateLimit ?? this.#roleQuota(principal.role);
    if (quota === 0) return undefined;
    return { name: principal === null ? 'address' : 'caller', quota, windowSeconds: WINDOW_S };
  }

  /** The tighter budget of POST /v1/orders, spent on top of the caller's own. */
  ordersPolicy(): Policy | undefined {
    const quota = this.#config.rateLimitOrdersCreate;
    return quota === 0 ? undefined : { name: 'orders-create', quota, windowSeconds: WINDOW_S };
  }

  /** Failed authentications per address. */
  failurePolicy(): Policy {
    return { name: 'failed-auth', quota: this.#config.authFailureLimit, windowSeconds: WINDOW_S };
  }

  take(key: string, policy: Policy): Decision | Promise<Decision> {
    return (this.#redis ?? this.#memory).take(`${policy.name}:${key}`, policy.quota, policy.windowSeconds * 1000);
  }

  /** Counted in memory only: failures are an instance's own defence, and must never wait on Redis. */
  takeLocal(key: string, policy: Policy): Decision {
    return this.#memory.take(`${policy.name}:${key}`, policy.quota, policy.windowSeconds * 1000);
  }

  /** Whether the address is over its failed-authentication budget now, without spending from it. */
  isThrottled(address: string): boolean {
    return this.#memory.wouldRefuse(`failed-auth:${address}`, this.failurePolicy().quota, WINDOW_MS);
  }

  #roleQuota(role: Role | null): number {
    // External subjects have no role here; they are counted like editors.
    if (role === 'reader') return this.#config.rateLimitReader;
    if (role === 'admin') return this.#config.rateLimitAdmin;
    return this.#config.rateLimitEditor;
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    await this.#redis?.close();
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
  interface FastifyContextConfig {
    /** false: not counted (health probes). */
    rateLimit?: boolean;
  }
}


/** How long a failed authentication is held back once an address has used half its budget. */
const FAILURE_DELAY_MS = 250;

/**
 * Counts every request but the health probes, after authentication (preParsing: every onRequest
 * hook, the route's credential check included, has run; the body is not read yet, so a caller
 * over its limit costs no parsing). Failed authentications are counted per address, in memory:
 * past half the budget each 401 is held back a little, past the budget the address's requests
 * with credentials get 429 before their credentials are checked; other addresses, and callers
 * with valid keys elsewhere, are not affected.
 */
export function registerRateLimits(app: FastifyInstance, limiter: RateLimiter): void {
  app.decorate('rateLimiter', limiter);
  app.addHook('onReady', async () => limiter.connected());
  app.addHook('onClose', async () => limiter.close());

  app.addHook('onRequest', (request, reply, done) => {
    if (!hasCredentials(request) || !limiter.isThrottled(request.ip)) return done();
    const policy = limiter.failurePolicy();
    const decision = limiter.takeLocal(request.ip, policy);
    done(refusal(policy, decision, reply, 'Too many requests with invalid credentials came from this address'));
  });

  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.routeOptions.config.rateLimit === false) return done(null, payload);
    const policy = limiter.policyOf(request.principal);
    const orders = request.method === 'POST' && request.routeOptions.url === '/v1/orders' && request.principal !== null ? limiter.ordersPolicy() : undefined;
    if (policy === undefined && orders === undefined) return done(null, payload);
    const key = subjectOf(request);
    void count(limiter, key, policy, orders).then(
      (decisions) => {
        const headers = rateLimitHeaders(decisions);
        for (const [name, value] of Object.entries(headers)) reply.header(name, value);
        const refused = decisions.find(({ decision }) => !decision.allowed);
        if (refused === undefined) return done(null, payload);
        done(refusal(refused.policy, refused.decision, reply, refused.policy.name === 'orders-create' ? 'This caller has placed too many orders' : `This ${refused.policy.name} has made too many requests`));
      },
      (error: Error) => done(error),
    );
  });

  // A failed authentication spends from the address's failure budget; past half of it, the
  // answer is held back, so guessing keys gets slower before it is refused.
  app.addHook('onSend', (request, reply, payload, done) => {
    // Only credentials that were wrong count; a request that sent none is not guessing.
    if (reply.statusCode !== 401 || !hasCredentials(request)) return done(null, payload);
    const decision = limiter.takeLocal(request.ip, limiter.failurePolicy());
    if (decision.remaining >= limiter.failurePolicy().quota / 2) return done(null, payload);
    setTimeout(() => done(null, payload), FAILURE_DELAY_MS);
  });
}

function hasCredentials(request: FastifyRequest): boolean {
  return request.headers['x-api-key'] !== undefined || request.headers.authorization !== undefined;
}

function subjectOf(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal === null) return request.ip;
  return principal.callerId !== null ? String(principal.callerId) : `external:${principal.name}`;
}

async function count(limiter: RateLimiter, key: string, policy: Policy | undefined, orders: Policy | undefined): Promise<{ policy: Policy; decision: Decision }[]> {
  const decisions: { policy: Policy; decision: Decision }[] = [];
  if (policy !== undefined) decisions.push({ policy, decision: await limiter.take(key, policy) });
  // The tighter budget is spent only when the caller's own allowed the request.
  if (orders !== undefined && decisions.every(({ decision }) => decision.allowed)) decisions.push({ policy: orders, decision: await limiter.take(key, orders) });
  return decisions;
}

/** RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-09) for the policies counted. */
export function rateLimitHeaders(decisions: { policy: Policy; decision: Decision }[]): Record<string, string> {
  return {
    'ratelimit-policy': decisions.map(({ policy }) => `"${policy.name}";q=${policy.quota};w=${policy.windowSeconds}`).join(', '),
    ratelimit: decisions.map(({ policy, decision }) => `"${policy.name}";r=${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`).join(', '),
  };
}

function refusal(policy: Policy, decision: Decision, reply: FastifyReply, what: string): AppError {
  const retryAfter = Math.max(1, Math.ceil(decision.retryMs / 1000));
  if (!reply.hasHeader('ratelimit-policy')) {
    reply.header('ratelimit-policy', `"${policy.name}";q=${policy.quota};w=${policy.windowSeconds}`);
    reply.header('ratelimit', `"${policy.name}";r=0;t=${Math.ceil(decision.resetMs / 1000)}`);
  }
  return new AppError('rate-limited', `${what}: the "${policy.name}" policy allows ${policy.quota} per ${policy.windowSeconds} s. Retry after ${retryAfter} s.`, {
    headers: { 'retry-after': String(retryAfter) },
    extensions: { policy: policy.name, quota: policy.quota, window_seconds: policy.windowSeconds },
  });
}

