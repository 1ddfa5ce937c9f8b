/** GCRA in memory, per process: a module of its own, so that what counts only in memory loads no Redis client. */

/** Keys kept in memory at most; at the cap the oldest goes (a flood of addresses cannot grow memory). */
const MEMORY_KEYS = 100_000;
export interface Decision {
  allowed: boolean;
  remaining: number;
  /** Milliseconds until the whole quota is available again. */
  resetMs: number;
  /** Milliseconds until one more request is allowed (0 when allowed). */
  retryMs: number;
}

export interface Store {
  /** Spends `units` (one request; a batch spends one per entry) from the key's bucket, or none when they do not fit. */
  take(key: string, quota: number, windowMs: number, units?: number): Decision | Promise<Decision>;
}

/** GCRA over a Map of theoretical arrival times (milliseconds). */
export class MemoryStore implements Store {
  readonly #arrivals = new Map<string, number>();

  take(key: string, quota: number, windowMs: number, units = 1, now = Date.now()): Decision {
    const interval = windowMs / quota;
    const stored = this.#arrivals.get(key);
    const arrival = stored === undefined || stored < now ? now : stored;
    const next = arrival + interval * units;
    const allowedAt = next - windowMs;
    if (now < allowedAt)
      return { allowed: false, remaining: 0, resetMs: Math.ceil(arrival - now), retryMs: Math.ceil(allowedAt - now) };
    // At the cap the oldest key goes (a flood of new addresses); sweep() forgets full buckets.
    if (this.#arrivals.size >= MEMORY_KEYS && stored === undefined)
      this.#arrivals.delete(this.#arrivals.keys().next().value as string);
    this.#arrivals.set(key, next);
    return {
      allowed: true,
      remaining: Math.floor((windowMs - (next - now)) / interval),
      resetMs: Math.ceil(next - now),
      retryMs: 0,
    };
  }

  /** Forgets keys whose bucket is full again (they hold no information). */
  sweep(now = Date.now()): void {
    for (const [key, arrival] of this.#arrivals) if (arrival <= now) this.#arrivals.delete(key);
  }
}
