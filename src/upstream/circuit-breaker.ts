export type BreakerState = 'closed' | 'open' | 'half-open';

export interface CircuitBreakerOptions {
  /** Consecutive failed calls that open the circuit. */
  failures: number;
  /** Milliseconds the open circuit refuses calls before it lets one trial call through. */
  cooldownMs: number;
}

export type BreakerPermission = { allowed: true; trial: boolean } | { allowed: false; retryAfterMs: number };

/**
 * Stops calling an upstream that keeps failing, so callers get an answer (stale, or a quick
 * refusal) at once instead of waiting out a timeout each, and the upstream gets room to recover.
 *
 * closed → `failures` consecutive failures → open (every call refused) → after `cooldownMs`,
 * half-open: exactly one trial call goes through, the rest are still refused → the trial's
 * success closes the circuit, its failure opens it for another cooldown.
 *
 * A call reports its outcome with the `trial` flag it was allowed with. Outcomes of calls that
 * were allowed before the circuit opened and end while it is open or half-open are ignored:
 * only the trial decides, and a straggler must not close (or re-open) the circuit for it.
 */
export class CircuitBreaker {
  readonly #options: CircuitBreakerOptions;
  readonly #now: () => number;
  #consecutiveFailures = 0;
  #openedAt: number | undefined;
  #trialInFlight = false;

  constructor(options: CircuitBreakerOptions, now: () => number = Date.now) {
    this.#options = options;
    this.#now = now;
  }

  get state(): BreakerState {
    if (this.#openedAt === undefined) return 'closed';
    return this.#now() - this.#openedAt < this.#options.cooldownMs ? 'open' : 'half-open';
  }

  /** Whether a call may go out now; when not, how long until the trial call will be let through. */
  allow(): BreakerPermission {
    const state = this.state;
    if (state === 'closed') return { allowed: true, trial: false };
    if (state === 'half-open' && !this.#trialInFlight) {
      this.#trialInFlight = true;
      return { allowed: true, trial: true };
    }
    // While the trial is out, the wait is its outcome, not a known time: 0.
    const retryAfterMs = state === 'open' ? this.#openedAt! + this.#options.cooldownMs - this.#now() : 0;
    return { allowed: false, retryAfterMs };
  }

  succeeded(trial: boolean): void {
    if (trial) {
      this.#close();
    } else if (this.#openedAt === undefined) {
      this.#consecutiveFailures = 0;
    }
  }

  failed(trial: boolean): void {
    if (trial) {
      this.#open();
    } else if (this.#openedAt === undefined && ++this.#consecutiveFailures >= this.#options.failures) {
      this.#open();
    }
  }

  #open(): void {
    this.#openedAt = this.#now();
    this.#trialInFlight = false;
  }

  #close(): void {
    this.#openedAt = undefined;
    this.#trialInFlight = false;
    this.#consecutiveFailures = 0;
  }
}
