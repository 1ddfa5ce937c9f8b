import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from '../../src/upstream/circuit-breaker.js';

/** The breaker's states on an injected clock: closed → open → half-open (one trial) → closed or open. */

function breakerAt(start = 1_000_000) {
  const clock = { now: start };
  const breaker = new CircuitBreaker({ failures: 3, cooldownMs: 30_000 }, () => clock.now);
  const failTimes = (count: number) => {
    for (let index = 0; index < count; index++) breaker.failed(false);
  };
  return { clock, breaker, failTimes };
}

describe('circuit breaker', () => {
  it('circuit breaker: stays closed until the third consecutive failure, then refuses with the cooldown left', () => {
    const { clock, breaker, failTimes } = breakerAt();
    failTimes(2);
    expect(breaker.state).toBe('closed');
    expect(breaker.allow()).toEqual({ allowed: true, trial: false });
    failTimes(1);
    expect(breaker.state).toBe('open');
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 30_000 });
    clock.now += 12_345;
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 17_655 });
  });

  it('circuit breaker: a success resets the count of consecutive failures', () => {
    const { breaker, failTimes } = breakerAt();
    failTimes(2);
    breaker.succeeded(false);
    failTimes(2);
    expect(breaker.state).toBe('closed');
  });

  it('circuit breaker: after the cooldown exactly one trial call goes through, the others are still refused', () => {
    const { clock, breaker, failTimes } = breakerAt();
    failTimes(3);
    clock.now += 30_000;
    expect(breaker.state).toBe('half-open');
    expect(breaker.allow()).toEqual({ allowed: true, trial: true });
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 0 });
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 0 });
  });

  it('circuit breaker: closes when the trial succeeds', () => {
    const { clock, breaker, failTimes } = breakerAt();
    failTimes(3);
    clock.now += 30_000;
    breaker.allow();
    breaker.succeeded(true);
    expect(breaker.state).toBe('closed');
    // Closed means counting from zero again.
    failTimes(2);
    expect(breaker.allow()).toEqual({ allowed: true, trial: false });
  });

  it('circuit breaker: opens for another whole cooldown when the trial fails', () => {
    const { clock, breaker, failTimes } = breakerAt();
    failTimes(3);
    clock.now += 31_000;
    breaker.allow();
    breaker.failed(true);
    expect(breaker.state).toBe('open');
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 30_000 });
    clock.now += 30_000;
    expect(breaker.allow()).toEqual({ allowed: true, trial: true });
  });

  it('circuit breaker: outcomes of calls allowed before it opened neither close it nor extend the cooldown', () => {
    const { clock, breaker, failTimes } = breakerAt();
    failTimes(3);
    clock.now += 10_000;
    breaker.succeeded(false);
    breaker.failed(false);
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 20_000 });
    clock.now += 20_000;
    expect(breaker.allow()).toEqual({ allowed: true, trial: true });
    breaker.succeeded(false);
    expect(breaker.state).toBe('half-open');
    expect(breaker.allow()).toEqual({ allowed: false, retryAfterMs: 0 });
  });
});
