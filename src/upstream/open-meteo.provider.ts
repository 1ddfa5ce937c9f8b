import { fetchJson } from './fetch-json.js';
import { openMeteoErrorReason, readOpenMeteoAnswer } from './open-meteo.answer.js';
import { UpstreamFailure } from './upstream-failure.js';
import type { Coordinates, CurrentWeather, WeatherProvider } from './weather-provider.js';

/** The forecast answer is well under 1 KB; a megabyte means something else is answering. */
const MAX_ANSWER_BYTES = 1_048_576;

/**
 * Open-Meteo's forecast API (https://open-meteo.com/en/docs): the `current` block of
 * GET /v1/forecast, in the units rowi serves, with times in GMT so they read as UTC.
 */
export class OpenMeteoProvider implements WeatherProvider {
  readonly name = 'open-meteo';
  readonly #forecastUrl: URL;

  /** `baseUrl` may carry a path prefix (a proxy or a self-hosted mirror); /v1/forecast goes below it. */
  constructor(baseUrl: string) {
    this.#forecastUrl = new URL('v1/forecast', baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  }

  async current(at: Coordinates, signal: AbortSignal): Promise<CurrentWeather> {
    const url = new URL(this.#forecastUrl);
    url.search = new URLSearchParams({
      latitude: String(at.latitude),
      longitude: String(at.longitude),
      current: 'temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code',
      wind_speed_unit: 'kmh',
      temperature_unit: 'celsius',
      timezone: 'GMT',
    }).toString();
    const { status, body } = await fetchJson(url, { signal, maxBytes: MAX_ANSWER_BYTES });
    // Open-Meteo answers 200 or an error; only 200 carries a forecast, and Cache-Status reports
    // a stored answer's fwd-status as 200.
    if (status !== 200) {
      const reason = openMeteoErrorReason(body);
      throw new UpstreamFailure('bad-answer', `open-meteo answered HTTP ${status}${reason ? `: ${reason}` : ''}`, {
        status,
      });
    }
    return readOpenMeteoAnswer(body);
  }
}
