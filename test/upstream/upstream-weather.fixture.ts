import pino from 'pino';
import { OpenMeteoProvider } from '../../src/upstream/open-meteo.provider.js';
import { UpstreamWeather, type UpstreamWeatherOptions } from '../../src/upstream/upstream-weather.js';
import { startFakeOpenMeteo, type FakeOpenMeteo } from '../helpers/fake-open-meteo.js';

/**
 * UpstreamWeather in front of the real Open-Meteo provider and a fake Open-Meteo server, on a
 * clock the test moves (timeouts still run on real time), logging into `logs`.
 */
export interface WeatherFront {
  fake: FakeOpenMeteo;
  weather: UpstreamWeather;
  clock: { now: number };
  logs: { level: number; msg: string }[];
  close(): Promise<void>;
}

export const TEST_OPTIONS: UpstreamWeatherOptions = {
  ttlSeconds: 600,
  staleLimitSeconds: 3600,
  timeoutMs: 200,
  maxEntries: 100,
  breakerFailures: 3,
  breakerCooldownMs: 30_000,
};

export const PINO_WARN = 40;

export async function startWeatherFront(options: Partial<UpstreamWeatherOptions> = {}): Promise<WeatherFront> {
  const fake = await startFakeOpenMeteo();
  const clock = { now: Date.parse('2026-11-23T14:05:00.000Z') };
  const logs: WeatherFront['logs'] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const weather = new UpstreamWeather(
    new OpenMeteoProvider(fake.url),
    { ...TEST_OPTIONS, ...options },
    log,
    () => clock.now,
  );
  return {
    fake,
    weather,
    clock,
    logs,
    async close() {
      weather.close();
      await fake.close();
    },
  };
}

export const BERLIN = { latitude: 52.52, longitude: 13.41 };
export const WELLINGTON = { latitude: -41.29, longitude: 174.78 };
