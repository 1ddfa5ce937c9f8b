import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { detailFor, formatCacheStatus, type CacheStatusParts } from './cache-status.js';
import { CircuitBreaker, type BreakerState } from './circuit-breaker.js';
import { failureForAbort, UpstreamFailure, type UpstreamFailureKind } from './upstream-failure.js';
import { createWeatherProvider } from './providers.js';
import { metrics, watchBreaker } from '../observability/metrics.js';
import type { Coordinates, CurrentWeather, WeatherProvider } from './weather-provider.js';

export interface UpstreamWeatherOptions {
  ttlSeconds: number;
  staleLimitSeconds: number;
  timeoutMs: number;
  maxEntries: number;
  breakerFailures: number;
  breakerCooldownMs: number;
}

export type UpstreamLookup =
  | {
      ok: true;
      weather: CurrentWeather;
      source: string;
      /** epoch ms when rowi received the provider's answer */
      fetchedAt: number;
      ageSeconds: number;
      ttlSeconds: number;
      stale: boolean;
      /** RFC 9211 Cache-Status value */
      cacheStatus: string;
      /** Why a stale answer is served. */
      failure?: UpstreamFailure;
    }
  | { ok: false; failure: UpstreamFailure; cacheStatus: string };

type ServedLookup = Extract<UpstreamLookup, { ok: true }>;

interface CachedAnswer {
  weather: CurrentWeather;
  fetchedAt: number;
}

type CallOutcome = { ok: true; answer: CachedAnswer } | { ok: false; failure: UpstreamFailure };

/**
 * The provider behind a cache, so that rowi asks it as little as possible and answers even when
 * it fails. Per place: a fresh answer (younger than the TTL) is served without a call; otherwise
 * one call goes out, and lookups of the same place meanwhile share it (a burst for an uncached
 * place is one call). If the call fails, or the circuit breaker refuses it, an answer up to
 * staleLimitSeconds past its TTL is served marked stale (RFC 5861's stale-if-error, done by the
 * origin); without one the lookup reports the failure. A failure is never cached: the next lookup
 * asks again, as far as the breaker allows. Within one lookup there is no retry: the caller's
 * latency budget is the one timeout.
 */
export class UpstreamWeather {
  readonly source: string;
  readonly #provider: WeatherProvider;
  readonly #options: UpstreamWeatherOptions;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => number;
  readonly #breaker: CircuitBreaker;
  /** Least recently used first: Map keeps insertion order, and a read re-inserts. */
  readonly #cache = new Map<string, CachedAnswer>();
  readonly #inFlight = new Map<string, Promise<CallOutcome>>();
  readonly #deadlines = new Map<AbortController, NodeJS.Timeout>();
  #calls = 0;
  /** What the provider's last call ended with, so a failure is logged once when it starts, not per call. */
  #failing: UpstreamFailureKind | undefined;
  #closed = false;

  constructor(
    provider: WeatherProvider,
    options: UpstreamWeatherOptions,
    log: FastifyBaseLogger,
    now: () => number = Date.now,
  ) {
    this.source = provider.name;
    this.#provider = provider;
    this.#options = options;
    this.#log = log;
    this.#now = now;
    this.#breaker = new CircuitBreaker(
      { failures: options.breakerFailures, cooldownMs: options.breakerCooldownMs },
      now,
    );
    watchBreaker(() => this.#breaker.state);
  }

  /** Calls made to the provider since start, for tests and the bench. */
  get calls(): number {
    return this.#calls;
  }

  breakerState(): BreakerState {
    return this.#breaker.state;
  }

  /** Never rejects: every failure is in the result. */
  async lookup(at: Coordinates): Promise<UpstreamLookup> {
    const key = `${at.latitude},${at.longitude}`;
    const cached = this.#read(key);
    if (cached && this.#ageSeconds(cached) < this.#options.ttlSeconds) {
      metrics.upstreamCache.inc({ result: 'hit' });
      return this.#served(cached, { hit: true });
    }
    metrics.upstreamCache.inc({ result: cached ? 'expired' : 'miss' });
    const fwd = cached ? 'stale' : 'uri-miss';
    let call = this.#inFlight.get(key);
    const collapsed = call !== undefined;
    if (call === undefined) {
      if (this.#closed)
        return this.#fallBack(key, cached, new UpstreamFailure('unreachable', 'the weather provider is closed'), {});
      const permission = this.#breaker.allow();
      if (!permission.allowed) {
        const retryAfterSeconds = Math.max(1, Math.ceil(permission.retryAfterMs / 1000));
        const refusal = new UpstreamFailure(
          'circuit-open',
          `${this.source} is not called for now: it failed ${this.#options.breakerFailures === 1 ? 'once' : `${this.#options.breakerFailures} times in a row`}`,
          { retryAfterSeconds },
        );
        // Nothing was forwarded: a stale answer is a cache hit, and there is no fwd to report.
        return this.#fallBack(key, cached, refusal, {});
      }
      call = this.#callProvider(key, at, permission.trial).finally(() => this.#inFlight.delete(key));
      this.#inFlight.set(key, call);
    }
    const outcome = await call;
    if (outcome.ok) return this.#served(outcome.answer, { fwd, fwdStatus: 200, stored: true, collapsed });
    return this.#fallBack(key, cached, outcome.failure, { fwd, fwdStatus: outcome.failure.status, collapsed });
  }

  /** Cancels calls in flight (their lookups fall back as on any failure) and stops calling. */
  close(): void {
    this.#closed = true;
    for (const [controller, deadline] of this.#deadlines) {
      clearTimeout(deadline);
      controller.abort(new DOMException('rowi is closing', 'AbortError'));
    }
    this.#deadlines.clear();
  }

  async #callProvider(key: string, at: Coordinates, trial: boolean): Promise<CallOutcome> {
    this.#calls++;
    const controller = new AbortController();
    const timeoutMs = this.#options.timeoutMs;
    this.#deadlines.set(
      controller,
      setTimeout(
        () => controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')),
        timeoutMs,
      ),
    );
    try {
      // The race keeps the deadline even for a provider that does not watch its signal.
      const weather = await Promise.race([
        this.#provider.current(at, controller.signal),
        rejectWhenAborted(controller.signal),
      ]);
      const answer = { weather, fetchedAt: this.#now() };
      this.#store(key, answer);
      this.#breaker.succeeded(trial);
      metrics.upstreamCalls.inc({ outcome: 'ok' });
      if (this.#failing !== undefined)
        this.#log.info({ source: this.source }, `weather provider ${this.source} answers again`);
      this.#failing = undefined;
      return { ok: true, answer };
    } catch (error) {
      const failure = this.#asFailure(error, controller.signal);
      metrics.upstreamCalls.inc({ outcome: failure.kind });
      // Cancelled by close(): says nothing about the provider.
      if (!this.#closed) this.#noteFailure(failure, trial);
      return { ok: false, failure };
    } finally {
      clearTimeout(this.#deadlines.get(controller));
      this.#deadlines.delete(controller);
    }
  }

  #noteFailure(failure: UpstreamFailure, trial: boolean): void {
    const before = this.#breaker.state;
    // A 4xx refuses this request (a place the provider will not answer for), and says the
    // provider is up: it must not stop the calls for every other place. 408 and 429 are the
    // provider being slow or overloaded, which is what the breaker is for.
    if (refusesTheRequestOnly(failure)) this.#breaker.succeeded(trial);
    else this.#breaker.failed(trial);
    const facts = { source: this.source, kind: failure.kind, status: failure.status };
    if (failure.kind !== this.#failing)
      this.#log.warn(facts, `weather provider ${this.source} fails: ${failure.message}`);
    else this.#log.debug(facts, `weather provider ${this.source} still fails: ${failure.message}`);
    this.#failing = failure.kind;
    if (this.#breaker.state === 'open' && before !== 'open') {
      const message = `circuit breaker open: ${this.source} is not called for ${this.#options.breakerCooldownMs} ms`;
      if (before === 'closed')
        this.#log.warn(
          { source: this.source },
          `${message} after ${this.#options.breakerFailures === 1 ? 'a failure' : `${this.#options.breakerFailures} failures in a row`}`,
        );
      else this.#log.info({ source: this.source }, `${message} more: the trial call failed`);
    }
  }

  #asFailure(error: unknown, signal: AbortSignal): UpstreamFailure {
    if (error instanceof UpstreamFailure) return error;
    if (signal.aborted) return failureForAbort(signal);
    // A provider must throw UpstreamFailure only; anything else is a bug in it, logged in full.
    this.#log.error({ err: error, source: this.source }, `weather provider ${this.source} threw an unexpected error`);
    return new UpstreamFailure('bad-answer', `${this.source} failed unexpectedly`, { cause: error });
  }

  #served(answer: CachedAnswer, status: Omit<CacheStatusParts, 'ttl'>): ServedLookup {
    const ageSeconds = this.#ageSeconds(answer);
    const ttlSeconds = this.#options.ttlSeconds;
    const cacheStatus = formatCacheStatus({ ...status, ttl: ttlSeconds - ageSeconds });
    return {
      ok: true,
      weather: answer.weather,
      source: this.source,
      fetchedAt: answer.fetchedAt,
      ageSeconds,
      ttlSeconds,
      stale: false,
      cacheStatus,
    };
  }

  /** After a failure: the cached answer if it is within the stale limit, else the failure. */
  #fallBack(
    key: string,
    cached: CachedAnswer | undefined,
    failure: UpstreamFailure,
    status: Pick<CacheStatusParts, 'fwd' | 'fwdStatus' | 'collapsed'>,
  ): UpstreamLookup {
    const detail = detailFor(failure.kind);
    if (cached && this.#ageSeconds(cached) <= this.#options.ttlSeconds + this.#options.staleLimitSeconds) {
      const served = this.#served(cached, { ...status, hit: status.fwd === undefined, detail });
      return { ...served, stale: true, failure };
    }
    if (cached && this.#cache.get(key) === cached) this.#cache.delete(key);
    return { ok: false, failure, cacheStatus: formatCacheStatus({ ...status, detail }) };
  }

  #ageSeconds(answer: CachedAnswer): number {
    return Math.max(0, Math.floor((this.#now() - answer.fetchedAt) / 1000));
  }

  #read(key: string): CachedAnswer | undefined {
    const answer = this.#cache.get(key);
    if (answer) {
      this.#cache.delete(key);
      this.#cache.set(key, answer);
    }
    return answer;
  }

  #store(key: string, answer: CachedAnswer): void {
    this.#cache.delete(key);
    this.#cache.set(key, answer);
    for (const oldest of this.#cache.keys()) {
      if (this.#cache.size <= this.#options.maxEntries) break;
      this.#cache.delete(oldest);
    }
  }
}

function refusesTheRequestOnly(failure: UpstreamFailure): boolean {
  return (
    failure.status !== undefined &&
    failure.status >= 400 &&
    failure.status < 500 &&
    failure.status !== 408 &&
    failure.status !== 429
  );
}

function rejectWhenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) =>
    signal.addEventListener('abort', () => reject(signal.reason), { once: true }),
  );
}

/** The configured provider behind its cache, or undefined when no provider is configured. */
export function upstreamWeatherFor(config: Config, log: FastifyBaseLogger): UpstreamWeather | undefined {
  const provider = createWeatherProvider(config);
  if (provider === undefined) return undefined;
  return new UpstreamWeather(
    provider,
    {
      ttlSeconds: config.weatherCacheTtl,
      staleLimitSeconds: config.weatherStaleLimit,
      timeoutMs: config.weatherTimeout,
      maxEntries: config.weatherCacheEntries,
      breakerFailures: config.weatherBreakerFailures,
      breakerCooldownMs: config.weatherBreakerCooldown,
    },
    log,
  );
}
