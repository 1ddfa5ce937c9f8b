import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../auth/principals.js';
import type { Config } from '../config.js';
import { MemoryStore, RedisStore, type Decision } from './rate-limit-stores.js';

/**
 * The rate limits (rate-limit.ts counts requests against them): each caller's own budget by its
 * role or its own limit, the address's for requests without credentials, the budgets routes
 * declare on top (orders-create), and the failed-authentication budget of an address; where the
 * counters live (rate-limit-stores.ts).
 */
const WINDOW_S = 60;
const WINDOW_MS = WINDOW_S * 1000;

/** The names of the policies, as RateLimit-Policy and a 429's `policy` give them (README "Limits"). */
export const POLICY_NAMES = ['caller', 'address', 'orders-create', 'failed-auth'] as const;

export interface Policy {
  name: (typeof POLICY_NAMES)[number];
  quota: number;
  windowSeconds: number;
  /** Its RateLimit-Policy item, made once. */
  header: string;
}

export function policy(name: Policy['name'], quota: number): Policy {
  return { name, quota, windowSeconds: WINDOW_S, header: `"${name}";q=${quota};w=${WINDOW_S}` };
}

/** The budgets a route may declare on top of the caller's own (see rateLimitBudget). */
export type Budget = 'orders-create';

/** The limits a request is counted against; empty when none applies. */
export class RateLimiter {
  readonly #memory = new MemoryStore();
  /** POST /v1/orders by caller, when counted in memory. */
  readonly #orders = new MemoryStore();
  /** Failed authentications, by client address: always this instance's own. */
  readonly #failures = new MemoryStore();
  readonly #redis: RedisStore | undefined;
  readonly #policies: Record<'address' | 'reader' | 'editor' | 'admin' | 'orders' | 'failures', Policy | undefined>;
  readonly #sweep: NodeJS.Timeout;

  /** `namespace`: what identifies the database (instances on one database share their counters). */
  constructor(config: Config, namespace: string, log: FastifyBaseLogger) {
    // External subjects have no role here; they are counted like editors. 0: unlimited.
    const unlessZero = (name: Policy['name'], quota: number) => (quota === 0 ? undefined : policy(name, quota));
    this.#policies = {
      address: unlessZero('address', config.rateLimitAnonymous),
      reader: unlessZero('caller', config.rateLimitReader),
      editor: unlessZero('caller', config.rateLimitEditor),
      admin: unlessZero('caller', config.rateLimitAdmin),
      orders: unlessZero('orders-create', config.rateLimitOrdersCreate),
      failures: unlessZero('failed-auth', config.authFailureLimit),
    };
    this.#redis = config.redisUrl === '' ? undefined : new RedisStore(config.redisUrl, namespace, this.#memory, log);
    this.#sweep = setInterval(() => {
      this.#memory.sweep();
      this.#orders.sweep();
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
    return this.#redis.degradedSince === undefined ? 'redis' : 'instance (Redis unreachable)';
  }

  /** The caller's (or the address's) own policy. */
  policyOf(principal: Principal | null): Policy | undefined {
    if (principal === null) return this.#policies.address;
    if (principal.rateLimit !== null) return policy('caller', principal.rateLimit);
    return principal.role === 'reader' ? this.#policies.reader : principal.role === 'admin' ? this.#policies.admin : this.#policies.editor;
  }

  /** A budget a route declares, spent on top of the caller's own; undefined when its quota is 0 (unlimited). */
  budgetPolicy(_budget: Budget): Policy | undefined {
    return this.#policies.orders;
  }

  /** Failed authentications per address; undefined when ROWI_AUTH_FAILURE_LIMIT is 0. */
  failurePolicy(): Policy | undefined {
    return this.#policies.failures;
  }

  take(key: string, policy: Policy): Decision | Promise<Decision> {
    if (this.#redis !== undefined) return this.#redis.take(`${policy.name}:${key}`, policy.quota, WINDOW_MS);
    // In memory, one store per policy: no key to build per request.
    return (policy.name === 'orders-create' ? this.#orders : this.#memory).take(key, policy.quota, WINDOW_MS);
  }

  /** A failed authentication, counted in memory: an instance's own defence never waits on Redis. */
  takeFailure(address: string): Decision {
    return this.#failures.take(address, this.#policies.failures?.quota ?? Infinity, WINDOW_MS);
  }

  /** Whether the address is over its failed-authentication budget now, without spending from it. */
  isThrottled(address: string): boolean {
    const policy = this.#policies.failures;
    return policy !== undefined && this.#failures.wouldRefuse(address, policy.quota, WINDOW_MS);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    await this.#redis?.close();
  }
}
