import type { Condition } from './conditions.js';

/**
 * What a weather provider answers and how rowi asks it. Providers implement this module's
 * interface; providers.ts picks the configured one (so no provider is imported here).
 */
export interface Coordinates {
  latitude: number;
  longitude: number;
}

/** rowi's fields, mapped from a provider's answer. */
export interface CurrentWeather {
  temperature_c: number;
  humidity_pct: number;
  wind_kph: number;
  conditions: Condition;
  /** RFC 3339 UTC with milliseconds, e.g. 2026-11-23T14:00:00.000Z */
  observed_at: string;
}

/**
 * One upstream source of current weather. current() throws UpstreamFailure for everything that
 * goes wrong, never another error type, and gives up when `signal` aborts.
 */
export interface WeatherProvider {
  /** e.g. 'open-meteo'; becomes `source` in rowi's answers */
  readonly name: string;
  current(at: Coordinates, signal: AbortSignal): Promise<CurrentWeather>;
}
