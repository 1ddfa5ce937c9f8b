import type { Config } from '../config.js';
import type { Condition } from '../resources/weather/conditions.js';
import { OpenMeteoProvider } from './open-meteo.provider.js';

// UpstreamFailure lives in its own module so providers can import it without importing this
// one, which imports every provider (no import cycle).
export { UpstreamFailure, type UpstreamFailureKind } from './upstream-failure.js';

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

/** The configured provider, or undefined when ROWI_WEATHER_PROVIDER is empty (off). */
export function createWeatherProvider(config: Pick<Config, 'weatherProvider' | 'weatherUrl'>): WeatherProvider | undefined {
  switch (config.weatherProvider) {
    case '':
      return undefined;
    case 'open-meteo':
      return new OpenMeteoProvider(config.weatherUrl);
    default: {
      // A provider added to the config schema without a case here fails to compile.
      const unknown: never = config.weatherProvider;
      throw new Error(`unknown weather provider ${JSON.stringify(unknown)}`);
    }
  }
}
