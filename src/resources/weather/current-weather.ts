import type { Executor } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { UpstreamFailure } from '../../upstream/upstream-failure.js';
import type { UpstreamWeather } from '../../upstream/upstream-weather.js';
import type { Weather } from './weather.schema.js';
import { getPlace, presentWeather, type StoredPlace } from './weather.service.js';

/** What the response headers say about how fresh the weather is (RFC 9111, RFC 9211). */
export interface Freshness {
  cacheControl: string;
  /** Seconds since rowi received the value from the provider; 0 for recorded weather. */
  age: number;
  cacheStatus: string | undefined;
  /** The entity tag's opaque part, and whether it is weak (provider or stale weather is not the stored record). */
  etag: { opaque: string; weak: boolean };
}

/** The weather of a place as GET shows it, with how fresh it is. */
export interface WeatherReading {
  weather: Weather;
  freshness: Freshness;
}

/** Recorded weather can change with any PUT: callers revalidate (If-None-Match) before reuse. */
export const REVALIDATE = 'private, no-cache';

/**
 * GET /v1/weather/{place}: the latest weather, from the newest of two sources. Without a
 * provider, or for a place without coordinates, that is the latest recorded observation. With
 * one, the provider's current weather (cached, coalesced, behind a circuit breaker) unless a
 * recorded observation is newer. When the provider fails, whatever rowi still has is served
 * with `stale: true` (stale-if-error); with nothing at all, 502 or 504.
 */
export async function readCurrentWeather(
  db: Executor,
  upstream: UpstreamWeather | undefined,
  slug: string,
): Promise<WeatherReading> {
  const place = await getPlace(db, slug);
  if (!upstream || place.latitude === null || place.longitude === null) return recorded(place, false, undefined);

  const lookup = await upstream.lookup({ latitude: place.latitude, longitude: place.longitude });
  if (!lookup.ok) {
    if (place.observed_at !== null) return recorded(place, true, lookup.cacheStatus);
    throw upstreamProblem(upstream.source, lookup.failure, lookup.cacheStatus);
  }
  if (place.observed_at !== null && place.observed_at > lookup.weather.observed_at)
    return recorded(place, lookup.stale, lookup.cacheStatus);
  return {
    weather: { ...presentWeather(place, lookup.stale), ...lookup.weather, source: lookup.source },
    freshness: {
      cacheControl: lookup.stale ? REVALIDATE : `private, max-age=${lookup.ttlSeconds}`,
      age: lookup.ageSeconds,
      cacheStatus: lookup.cacheStatus,
      etag: {
        opaque: `v${place.version}-u${lookup.fetchedAt.toString(36)}${lookup.stale ? '-stale' : ''}`,
        weak: true,
      },
    },
  };
}

function recorded(place: StoredPlace, stale: boolean, cacheStatus: string | undefined): WeatherReading {
  return {
    weather: presentWeather(place, stale),
    freshness: {
      cacheControl: REVALIDATE,
      age: 0,
      cacheStatus,
      // The stored record's own tag (the one If-Match takes), unless the stale flag makes this another representation.
      etag: stale ? { opaque: `v${place.version}-stale`, weak: true } : { opaque: `v${place.version}`, weak: false },
    },
  };
}

function upstreamProblem(provider: string, failure: UpstreamFailure, cacheStatus: string): AppError {
  const headers: Record<string, string> = { 'cache-status': cacheStatus };
  if (failure.kind === 'timeout') {
    return new AppError(
      'upstream-timeout',
      `The weather provider ${provider} did not answer in time, and rowi has no earlier weather of this place to serve; retry later.`,
      {
        headers,
        extensions: { provider, failure: failure.kind },
      },
    );
  }
  if (failure.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(failure.retryAfterSeconds)));
  const why =
    failure.kind === 'circuit-open'
      ? `failed repeatedly, so rowi stops calling it for a while (it tries again in ${headers['retry-after'] ?? 'a few'} seconds)`
      : failure.kind === 'unreachable'
        ? 'could not be reached'
        : `gave an answer rowi cannot use (${failure.message})`;
  return new AppError(
    'upstream-error',
    `The weather provider ${provider} ${why}, and rowi has no earlier weather of this place to serve.`,
    {
      headers,
      extensions: {
        provider,
        failure: failure.kind,
        ...(failure.status !== undefined ? { upstream_status: failure.status } : {}),
      },
    },
  );
}
