import type { Config } from '../config/config.js';
import { OpenMeteoProvider } from './open-meteo.provider.js';
import type { WeatherProvider } from './weather-provider.js';

/** The configured provider, or undefined when ROWI_WEATHER_PROVIDER is empty (off). */
export function createWeatherProvider(
  config: Pick<Config, 'weatherProvider' | 'weatherUrl'>,
): WeatherProvider | undefined {
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
