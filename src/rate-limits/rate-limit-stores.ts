import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import { faultOf } from '../observability/logger.js';
import { MemoryStore, type Decision, type Store } from './memory-store.js';

export { MemoryStore, type Decision, type Store };

/**
 * Where rate-limit counters live (rate-limit.ts decides what is counted): GCRA, the generic cell
 * rate algorithm, a token bucket kept as one timestamp per key (the theoretical arrival time of
 * the next request). A key may spend its whole quota at once, then one request every
 * window/quota. In memory, per instance; or in Redis, shared by every instance.
 */

/** How long a Redis call may take before this request is counted in memory instead. */
const REDIS_TIMEOUT_MS = 250;

/** The same algorithm in Redis, atomically, on Redis's clock (instances' clocks may differ). */
const GCRA_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local units = tonumber(ARGV[3] or '1')
local arrival = tonumber(redis.call('GET', KEYS[1]) or '0')
if arrival < now then arrival = now end
local nextArrival = arrival + interval * units
local allowedAt = nextArrival - window
if now < allowedAt then
  return {0, 0, math.ceil(arrival - now), math.ceil(allowedAt - now)}
end
redis.call('SET', KEYS[1], string.format('%.3f', nextArrival), 'PX', math.ceil(nextArrival - now) + 1000)
return {1, math.floor((window - (nextArrival - now)) / interval), math.ceil(nextArrival - now), 0}
`;

/**
 * What the instances tell one another through Redis: a subject (an address, a key, a client) that
 * has spent its failed-authentication budget, and a credential proven valid (auth-failures.ts).
 */
export type Topic = 'failed-auth' | 'auth-proven';

type RedisWithGcra = Redis & {
  gcra(key: string, interval: string, window: string, units: string): Promise<[number, number, number, number]>;
};

/** Redis counters, falling back to the memory store (per instance) while Redis cannot answer. */
export class RedisStore implements Store {
  readonly #redis: RedisWithGcra;
  readonly #fallback: MemoryStore;
  readonly #log: FastifyBaseLogger;
  #degradedSince: number | undefined;

  readonly #prefix: string;
  readonly #subscribers = new Set<Redis>();

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
      if (this.#degradedSince !== undefined)
        this.#log.info('Redis answers again: rate limits are shared between instances again');
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

  async take(key: string, quota: number, windowMs: number, units = 1): Promise<Decision> {
    return (await this.takeShared(key, quota, windowMs, units)) ?? this.#fallback.take(key, quota, windowMs, units);
  }

  /** The shared count alone: undefined while Redis cannot answer (the caller keeps its own). */
  async takeShared(key: string, quota: number, windowMs: number, units = 1): Promise<Decision | undefined> {
    try {
      const [allowed, remaining, resetMs, retryMs] = await this.#redis.gcra(
        `${this.#prefix}${key}`,
        String(windowMs / quota),
        String(windowMs),
        String(units),
      );
      return { allowed: allowed === 1, remaining, resetMs, retryMs };
    } catch (error) {
      this.#degrade(error);
      return undefined;
    }
  }

  /** Tells every instance (every process subscribed with onAnnouncements) `message` on `topic`. */
  announce(topic: Topic, message: Record<string, unknown>): void {
    this.#redis.publish(this.#channelOf(topic), JSON.stringify(message)).catch((error: unknown) => {
      this.#degrade(error);
    });
  }

  /**
   * Hears what announce says on the topics given, on a connection of its own (Redis gives a
   * subscribing connection to nothing else), subscribed again each time it reconnects.
   */
  onAnnouncements(handlers: Partial<Record<Topic, (message: Record<string, unknown>) => void>>): () => void {
    const channels = new Map(
      Object.entries(handlers).map(([topic, handler]) => [this.#channelOf(topic as Topic), handler]),
    );
    const subscriber = this.#redis.duplicate({ commandTimeout: undefined, autoResubscribe: false });
    // Its failures are the main connection's too, which says so (#degrade): nothing more to log.
    subscriber.on('error', () => {});
    // Subscribed on every connection, the first included (a command sent before it is ready would fail).
    subscriber.on('ready', () => void subscriber.subscribe(...channels.keys()).catch(() => {}));
    subscriber.on('message', (channel: string, text: string) => {
      const handler = channels.get(channel);
      if (handler === undefined) return;
      try {
        const message = JSON.parse(text) as unknown;
        if (typeof message === 'object' && message !== null) handler(message as Record<string, unknown>);
      } catch {
        // Not ours: another program on the channel.
      }
    });
    this.#subscribers.add(subscriber);
    return () => {
      this.#subscribers.delete(subscriber);
      subscriber.disconnect();
    };
  }

  /** Whether every connection subscribed with onAnnouncements is subscribed now (what it would hear is not missed). */
  get listening(): boolean {
    for (const subscriber of this.#subscribers) if (subscriber.status !== 'ready') return false;
    return true;
  }

  #channelOf(topic: Topic): string {
    return `${this.#prefix}${topic}`;
  }

  #degrade(error: unknown): void {
    if (this.#degradedSince !== undefined) return;
    this.#degradedSince = Date.now();
    this.#log.warn(
      `Redis cannot be reached: ${faultOf(error)}; each instance counts rate limits alone until it is back`,
    );
  }

  async close(): Promise<void> {
    for (const subscriber of this.#subscribers) subscriber.disconnect();
    this.#redis.disconnect();
  }
}
