import Type from 'typebox';
import { setting } from './serving.settings.js';

/** The settings of the upstream weather provider: which, where, how long to wait, its cache and circuit breaker. */
export const WEATHER_SETTINGS = {
  weatherProvider: setting(
    Type.Union([Type.Literal(''), Type.Literal('open-meteo')], {
      default: '',
      description:
        '`open-meteo`: ask this upstream provider for the current weather of places with coordinates; unset: off (recorded observations only)',
    }),
    'ROWI_WEATHER_PROVIDER',
  ),
  weatherUrl: setting(
    Type.String({
      default: 'https://api.open-meteo.com',
      pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$',
      'x-error': 'must be an http:// or https:// base URL without query or fragment',
      description: 'base URL of the weather provider (its API paths are appended)',
    }),
    'ROWI_WEATHER_URL',
  ),
  weatherTimeout: setting(
    Type.Integer({
      minimum: 100,
      maximum: 60_000,
      default: 2000,
      description:
        'milliseconds one call to the weather provider may take, body included, before it counts as timed out (504 when nothing is cached)',
    }),
    'ROWI_WEATHER_TIMEOUT',
  ),
  weatherCacheTtl: setting(
    Type.Integer({
      minimum: 1,
      maximum: 86_400,
      default: 600,
      description: 'seconds a provider answer is served from the cache before the provider is asked again',
    }),
    'ROWI_WEATHER_CACHE_TTL',
  ),
  weatherStaleLimit: setting(
    Type.Integer({
      minimum: 0,
      maximum: 604_800,
      default: 86_400,
      description: 'seconds past its TTL a cached provider answer may still be served (stale) while the provider fails',
    }),
    'ROWI_WEATHER_STALE_LIMIT',
  ),
  weatherCacheEntries: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1_000_000,
      default: 10_000,
      description: 'provider answers each process keeps at most (least recently used go first)',
    }),
    'ROWI_WEATHER_CACHE_ENTRIES',
  ),
  weatherBreakerFailures: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 5,
      description: 'consecutive failed provider calls that open the circuit breaker',
    }),
    'ROWI_WEATHER_BREAKER_FAILURES',
  ),
  weatherBreakerCooldown: setting(
    Type.Integer({
      minimum: 100,
      maximum: 3_600_000,
      default: 30_000,
      description: 'milliseconds the open circuit breaker stops calling the provider before one trial call',
    }),
    'ROWI_WEATHER_BREAKER_COOLDOWN',
  ),
};
