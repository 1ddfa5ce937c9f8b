import cluster from 'node:cluster';
import { MemoryStore, type Decision } from './memory-store.js';
import type { RedisStore } from './rate-limit-stores.js';

/**
 * Failed authentications per client address, counted for the whole deployment rather than per
 * process (docs/security.md "Failed authentication"):
 *
 * - the process group counts them: in memory when rowi runs as one process; with `--workers`, in
 *   the primary, which each worker tells of each failure (IPC) and which tells every worker when an
 *   address has spent its budget;
 * - with ROWI_REDIS_URL, Redis counts them too, for every instance; the instance whose failure
 *   spends the budget says so on a Redis channel, which every process of every instance hears.
 *
 * The check before credentials are read is a look-up in this process's own memory (the addresses
 * refused, and until when): no request waits on the primary or on Redis; only a failure costs a
 * message, and past half the budget its 401 is held back 250 ms anyway, far longer than the word
 * takes to reach the others. While Redis cannot be reached the group's count still holds, so the
 * budget is then one per instance: fail safe, never unlimited. The primary answering a worker
 * within ANSWER_MS is not awaited longer: the worker's own count (a lower bound) decides then.
 */

/** How long a worker waits for the primary's count of a failure before it goes by its own. */
const ANSWER_MS = 250;
/** Addresses remembered as refused at most; at the cap the oldest goes, as in the memory store. */
const BLOCKED_KEYS = 100_000;

type FailureMessage =
  | { type: 'rowi:auth-failure'; id: number; address: string; quota: number; windowMs: number }
  | { type: 'rowi:auth-failure-counted'; id: number; decision: Decision }
  | { type: 'rowi:auth-blocked'; address: string; forMs: number };

const isFailureMessage = (message: unknown): message is FailureMessage =>
  typeof message === 'object' &&
  message !== null &&
  ['rowi:auth-failure', 'rowi:auth-failure-counted', 'rowi:auth-blocked'].includes(
    (message as { type?: string }).type ?? '',
  );

/** How long a decision leaves the address refused: until the bucket holds one request again. */
export function blockedForMs(decision: Decision, quota: number, windowMs: number): number {
  if (!decision.allowed) return decision.retryMs;
  if (decision.remaining > 0) return 0;
  return Math.max(0, decision.resetMs + windowMs / quota - windowMs);
}

/** The more restrictive of two decisions on one request. */
function stricter(first: Decision, second: Decision | undefined): Decision {
  if (second === undefined) return first;
  if (first.allowed !== second.allowed) return first.allowed ? second : first;
  return second.remaining < first.remaining || second.retryMs > first.retryMs ? second : first;
}

/**
 * In the primary of `rowi serve --workers N`: counts every worker's failed authentications in one
 * store, answers the worker, and tells every worker when an address has spent its budget.
 */
export function countWorkerAuthFailures(): void {
  const store = new MemoryStore();
  const sweep = setInterval(() => store.sweep(), 60_000);
  sweep.unref();
  cluster.on('message', (worker, message: unknown) => {
    if (!isFailureMessage(message) || message.type !== 'rowi:auth-failure') return;
    const decision = store.take(message.address, message.quota, message.windowMs);
    const forMs = blockedForMs(decision, message.quota, message.windowMs);
    // Every worker hears of the block before the worker that counted it can answer its 401.
    if (forMs > 0)
      for (const each of Object.values(cluster.workers ?? {}))
        if (each?.isConnected())
          each.send({ type: 'rowi:auth-blocked', address: message.address, forMs } satisfies FailureMessage);
    if (worker.isConnected())
      worker.send({ type: 'rowi:auth-failure-counted', id: message.id, decision } satisfies FailureMessage);
  });
}

export class AuthFailures {
  readonly #quota: number;
  readonly #windowMs: number;
  /** This process's own count: the group's when alone, a lower bound of it in a worker. */
  readonly #own = new MemoryStore();
  /** Addresses refused, until when (this process's clock, milliseconds). */
  readonly #blocked = new Map<string, number>();
  readonly #redis: RedisStore | undefined;
  readonly #worker = cluster.isWorker && typeof process.send === 'function';
  readonly #waiting = new Map<number, (decision: Decision | undefined) => void>();
  #nextId = 0;
  readonly #onMessage = (message: unknown) => {
    if (!isFailureMessage(message)) return;
    if (message.type === 'rowi:auth-blocked') this.#block(message.address, message.forMs);
    else if (message.type === 'rowi:auth-failure-counted') this.#waiting.get(message.id)?.(message.decision);
  };
  readonly #unsubscribe: (() => void) | undefined;

  constructor(quota: number, windowMs: number, redis: RedisStore | undefined) {
    this.#quota = quota;
    this.#windowMs = windowMs;
    this.#redis = redis;
    if (this.#worker) process.on('message', this.#onMessage);
    this.#unsubscribe = redis?.onBlocked((address, forMs) => this.#block(address, forMs));
  }

  /** Milliseconds the address is still refused for; 0 when it may try. */
  refusedForMs(address: string, now = Date.now()): number {
    const until = this.#blocked.get(address);
    if (until === undefined) return 0;
    if (until > now) return until - now;
    this.#blocked.delete(address);
    return 0;
  }

  /** Counts a failed authentication everywhere it is counted; the strictest count decides. */
  record(address: string): Decision | Promise<Decision> {
    const own = this.#own.take(address, this.#quota, this.#windowMs);
    this.#block(address, blockedForMs(own, this.#quota, this.#windowMs));
    if (!this.#worker && this.#redis === undefined) return own;
    return Promise.all([this.#askPrimary(address), this.#askRedis(address)]).then(([group, shared]) =>
      stricter(stricter(own, group), shared),
    );
  }

  #askPrimary(address: string): Promise<Decision | undefined> {
    if (!this.#worker) return Promise.resolve(undefined);
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(undefined), ANSWER_MS);
      const settle = (decision: Decision | undefined) => {
        clearTimeout(timer);
        this.#waiting.delete(id);
        resolve(decision);
      };
      this.#waiting.set(id, settle);
      process.send!({
        type: 'rowi:auth-failure',
        id,
        address,
        quota: this.#quota,
        windowMs: this.#windowMs,
      } satisfies FailureMessage);
    });
  }

  async #askRedis(address: string): Promise<Decision | undefined> {
    if (this.#redis === undefined) return undefined;
    const decision = await this.#redis.takeShared(`failed-auth:${address}`, this.#quota, this.#windowMs);
    if (decision === undefined) return undefined;
    const forMs = blockedForMs(decision, this.#quota, this.#windowMs);
    if (forMs > 0) {
      this.#block(address, forMs);
      this.#redis.publishBlocked(address, forMs);
    }
    return decision;
  }

  #block(address: string, forMs: number): void {
    if (forMs <= 0) return;
    const until = Date.now() + forMs;
    const known = this.#blocked.get(address);
    if (known !== undefined && known >= until) return;
    if (known === undefined && this.#blocked.size >= BLOCKED_KEYS)
      this.#blocked.delete(this.#blocked.keys().next().value as string);
    this.#blocked.set(address, until);
  }

  sweep(now = Date.now()): void {
    this.#own.sweep(now);
    for (const [address, until] of this.#blocked) if (until <= now) this.#blocked.delete(address);
  }

  close(): void {
    if (this.#worker) process.off('message', this.#onMessage);
    this.#unsubscribe?.();
    for (const settle of this.#waiting.values()) settle(undefined);
  }
}
