import type { FastifyBaseLogger } from 'fastify';
import type { CallerBudget } from '../auth/context.js';
import type { Config } from '../config/config.js';
import { AuthFailures } from './auth-failures.js';
import { MemoryStore, type Decision } from './memory-store.js';
import type { RedisStore } from './rate-limit-stores.js';

/**
 * The rate limits (rate-limit.ts counts requests against them): each caller's own budget by its
 * role or its own limit, the address's for requests without credentials, the budgets routes
 * declare on top (orders-create), and the failed-authentication budget of an address; where the
 * counters live (rate-limit-stores.ts).
 */
const WINDOW_S = 60;
const WINDOW_MS = WINDOW_S * 1000;

/** The names of the policies, as RateLimit-Policy and a 429's `policy` give them (docs/limits.md). */
export const POLICY_NAMES = ['caller', 'address', 'orders-create', 'failed-auth'] as const;

export interface Policy {
  name: (typeof POLICY_NAMES)[number];
  quota: number;
  windowSeconds: number;
  /** Its RateLimit-Policy item, made once. */
  header: string;
  /** What a 429 of this policy says happened. */
  tooMany: string;
}

export function policy(
  name: Policy['name'],
  quota: number,
  tooMany = `This ${name} has made too many requests`,
): Policy {
  return { name, quota, windowSeconds: WINDOW_S, header: `"${name}";q=${quota};w=${WINDOW_S}`, tooMany };
}

/**
 * The budgets a route may declare on top of the caller's own (see rateLimitBudget): the setting
 * of each one's quota per caller, and what its 429 says. A budget is a policy of the same name.
 */
const BUDGETS = {
  'orders-create': {
    quotaOf: (config: Config) => config.rateLimitOrdersCreate,
    tooMany: 'This caller has placed too many orders',
  },
} as const satisfies Partial<Record<Policy['name'], { quotaOf: (config: Config) => number; tooMany: string }>>;
export type Budget = keyof typeof BUDGETS;

interface DeclaredBudget {
  /** Undefined when its quota is 0 (unlimited). */
  policy: Policy | undefined;
  /** Its counters, when counted in memory. */
  store: MemoryStore;
}

/**
 * What a failed authentication is counted against (auth-failures.ts): the client address, and what
 * the guess was aimed at, the public prefix of an API key or an OAuth client id.
 */
export type FailureSubject = { kind: 'address' | 'key' | 'client'; value: string };

const subjectKey = ({ kind, value }: FailureSubject) => (kind === 'address' ? value : `${kind}:${value}`);

/** What a 429 of the failed-authentication budget says was spent, by what it was counted against. */
const FAILURES_OF = {
  address: 'Too many requests with invalid credentials came from this address',
  key: 'Too many requests with invalid credentials named this API key',
  client: 'Too many requests with invalid credentials named this client',
} as const;

/** The limits a request is counted against; empty when none applies. */
export class RateLimiter {
  /** The callers' and addresses' own budgets, when counted in memory. */
  readonly #memory = new MemoryStore();
  readonly #budgets: Record<Budget, DeclaredBudget>;
  /** Failed authentications, by client address: the process group's and, with Redis, every instance's (auth-failures.ts). */
  readonly #failures: AuthFailures;
  readonly #redis: RedisStore | undefined;
  readonly #policies: Record<'address' | 'reader' | 'editor' | 'admin', Policy | undefined>;
  /** The failed-authentication budget, as each kind of subject's 429 says it; undefined when off. */
  readonly #failurePolicies: Record<FailureSubject['kind'], Policy> | undefined;
  readonly #sweep: NodeJS.Timeout;

  /**
   * The limits of these settings. The Redis client (ioredis, about 4 MB of each process's memory)
   * is loaded only when ROWI_REDIS_URL is set. `namespace`: what identifies the database
   * (instances on one database share their counters).
   */
  static async create(config: Config, namespace: string, log: FastifyBaseLogger): Promise<RateLimiter> {
    const stores = config.redisUrl === '' ? undefined : await import('./rate-limit-stores.js');
    return new RateLimiter(config, namespace, log, stores?.RedisStore);
  }

  private constructor(config: Config, namespace: string, log: FastifyBaseLogger, Redis: typeof RedisStore | undefined) {
    // External subjects have no role here; they are counted like editors. 0: unlimited.
    const unlessZero = (name: Policy['name'], quota: number, tooMany?: string) =>
      quota === 0 ? undefined : policy(name, quota, tooMany);
    this.#policies = {
      address: unlessZero('address', config.rateLimitAnonymous),
      reader: unlessZero('caller', config.rateLimitReader),
      editor: unlessZero('caller', config.rateLimitEditor),
      admin: unlessZero('caller', config.rateLimitAdmin),
    };
    this.#failurePolicies =
      config.authFailureLimit === 0
        ? undefined
        : {
            address: policy('failed-auth', config.authFailureLimit, FAILURES_OF.address),
            key: policy('failed-auth', config.authFailureLimit, FAILURES_OF.key),
            client: policy('failed-auth', config.authFailureLimit, FAILURES_OF.client),
          };
    this.#budgets = Object.fromEntries(
      Object.entries(BUDGETS).map(([name, budget]) => [
        name,
        { policy: unlessZero(name as Budget, budget.quotaOf(config), budget.tooMany), store: new MemoryStore() },
      ]),
    ) as Record<Budget, DeclaredBudget>;
    this.#redis = Redis === undefined ? undefined : new Redis(config.redisUrl, namespace, this.#memory, log);
    this.#failures = new AuthFailures(config.authFailureLimit || Infinity, WINDOW_MS, this.#redis);
    this.#sweep = setInterval(() => {
      this.#memory.sweep();
      for (const budget of Object.values(this.#budgets)) budget.store.sweep();
      this.#failures.sweep();
    }, WINDOW_MS);
    this.#sweep.unref();
  }

  /** Resolves once Redis (if any) answers, or has had `ms` to. */
  async connected(ms = 1000): Promise<void> {
    await this.#redis?.connected(ms);
  }

  /** How the counters are kept, for /health/ready and /v1/limits. */
  get sharing(): 'instance' | 'redis' | 'instance (Redis unreachable)' {
    if (this.#redis === undefined) return 'instance';
    // Shared only while the address blocks other instances announce are heard, too.
    return this.#redis.degradedSince === undefined && this.#redis.listening ? 'redis' : 'instance (Redis unreachable)';
  }

  /** The caller's (or, for null, the address's) own policy. */
  policyOf(caller: CallerBudget | null): Policy | undefined {
    if (caller === null) return this.#policies.address;
    if (caller.rateLimit !== null) return policy('caller', caller.rateLimit);
    return caller.role === 'reader'
      ? this.#policies.reader
      : caller.role === 'admin'
        ? this.#policies.admin
        : this.#policies.editor;
  }

  /** A budget a route declares, spent on top of the caller's own; undefined when its quota is 0 (unlimited). */
  budgetPolicy(budget: Budget): Policy | undefined {
    return this.#budgets[budget].policy;
  }

  /** Failed authentications per address (and per key, per client); undefined when ROWI_AUTH_FAILURE_LIMIT is 0. */
  failurePolicy(): Policy | undefined {
    return this.#failurePolicies?.address;
  }

  take(key: string, policy: Policy, units = 1): Decision | Promise<Decision> {
    if (this.#redis !== undefined) return this.#redis.take(`${policy.name}:${key}`, policy.quota, WINDOW_MS, units);
    // In memory, a store per budget: no key to build per request.
    const store = policy.name in BUDGETS ? this.#budgets[policy.name as Budget].store : this.#memory;
    return store.take(key, policy.quota, WINDOW_MS, units);
  }

  /** A failed authentication, counted against each subject by the process group and, with Redis, by every instance. */
  recordFailure(subjects: readonly FailureSubject[]): Decision | Promise<Decision> {
    return this.#failures.record(subjects.map(subjectKey));
  }

  /**
   * Whether one of the subjects is over its failed-authentication budget now, without spending from
   * it or asking anyone: the policy of the longest refusal and its decision (Retry-After: until one
   * more may be tried), else undefined.
   */
  throttled(subjects: readonly FailureSubject[]): { policy: Policy; decision: Decision } | undefined {
    const policies = this.#failurePolicies;
    if (policies === undefined) return undefined;
    let longest: { subject: FailureSubject; retryMs: number } | undefined;
    for (const subject of subjects) {
      const retryMs = this.#failures.refusedForMs(subjectKey(subject));
      if (retryMs > (longest?.retryMs ?? 0)) longest = { subject, retryMs };
    }
    if (longest === undefined) return undefined;
    const policy = policies[longest.subject.kind];
    const { retryMs } = longest;
    // The whole budget is back one window after the one request it now waits for.
    return {
      policy,
      decision: { allowed: false, remaining: 0, retryMs, resetMs: retryMs + WINDOW_MS - WINDOW_MS / policy.quota },
    };
  }

  /** A credential that authenticated a request (or that rowi issued): let past a refusal to be checked (auth-failures.ts). */
  prove(credential: string): void {
    if (this.#failurePolicies !== undefined) this.#failures.prove(credential);
  }

  isProven(credential: string): boolean {
    return this.#failures.isProven(credential);
  }

  /** A credential that failed its check: no longer let past a refusal. */
  disprove(credential: string): void {
    this.#failures.disprove(credential);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#failures.close();
    await this.#redis?.close();
  }
}
