import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OpenMeteoProvider } from '../../src/upstream/open-meteo.provider.js';
import { createWeatherProvider } from '../../src/upstream/providers.js';
import {
  OPEN_METEO_UNITS,
  startFakeOpenMeteo,
  type FakeBehaviour,
  type FakeOpenMeteo,
} from '../helpers/fake-open-meteo.js';
import { failureOf } from './expect-failure.js';

/**
 * The Open-Meteo provider against a real local server playing Open-Meteo: the request it sends,
 * how the documented answer maps onto rowi's fields, and the failure kind of every way the
 * upstream can go wrong (docs/guide.md "Weather": 504 for timeouts, 502 for the rest, decided from the kind).
 */

const BERLIN = { latitude: 52.52, longitude: 13.41 };

let fake: FakeOpenMeteo;
beforeEach(async () => {
  fake = await startFakeOpenMeteo();
});
afterEach(async () => {
  await fake.close();
});

function currentWeather(timeoutMs = 2000, baseUrl = fake.url) {
  return new OpenMeteoProvider(baseUrl).current(BERLIN, AbortSignal.timeout(timeoutMs));
}

describe('Open-Meteo provider: answers', () => {
  it('open-meteo: the current block maps to rowi fields, with observed_at in UTC, when the answer is normal', async () => {
    fake.setCurrent({
      time: '2026-11-23T14:00',
      temperature_2m: -3.5,
      relative_humidity_2m: 92,
      wind_speed_10m: 0,
      weather_code: 71,
    });
    expect(await currentWeather()).toEqual({
      temperature_c: -3.5,
      humidity_pct: 92,
      wind_kph: 0,
      conditions: 'snow',
      observed_at: '2026-11-23T14:00:00.000Z',
    });
  });

  it('open-meteo: the request asks for the documented current fields in km/h, °C and GMT', async () => {
    await currentWeather();
    expect(fake.calls).toBe(1);
    const request = fake.requests[0]!;
    expect(request.pathname).toBe('/v1/forecast');
    expect(Object.fromEntries(request.searchParams)).toEqual({
      latitude: '52.52',
      longitude: '13.41',
      current: 'temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code',
      wind_speed_unit: 'kmh',
      temperature_unit: 'celsius',
      timezone: 'GMT',
    });
  });

  it.each(['/mirror', '/mirror/'])(
    'open-meteo: /v1/forecast goes below the path prefix of a base URL ending in %j',
    async (prefix) => {
      await currentWeather(2000, `${fake.url}${prefix}`);
      expect(fake.requests[0]!.pathname).toBe('/mirror/v1/forecast');
    },
  );

  it.each([
    [0, 'clear'],
    [1, 'mostly-clear'],
    [2, 'partly-cloudy'],
    [3, 'overcast'],
    [45, 'fog'],
    [48, 'fog'],
    [53, 'drizzle'],
    [57, 'freezing-drizzle'],
    [61, 'rain'],
    [66, 'freezing-rain'],
    [77, 'snow'],
    [82, 'showers'],
    [86, 'snow-showers'],
    [95, 'thunderstorm'],
    [99, 'thunderstorm'],
  ])('open-meteo: weather_code %i becomes conditions %s', async (code, condition) => {
    fake.setCurrent({ weather_code: code });
    expect((await currentWeather()).conditions).toBe(condition);
  });

  it('createWeatherProvider: open-meteo when configured, nothing when the setting is empty', () => {
    expect(createWeatherProvider({ weatherProvider: 'open-meteo', weatherUrl: fake.url })?.name).toBe('open-meteo');
    expect(createWeatherProvider({ weatherProvider: '', weatherUrl: fake.url })).toBeUndefined();
  });
});

describe('Open-Meteo provider: failures', () => {
  it.each<[FakeBehaviour, string, number | undefined]>([
    ['status-500', 'bad-answer', 500],
    ['malformed-json', 'bad-answer', 200],
    ['truncated', 'bad-answer', 200],
    ['huge', 'bad-answer', 200],
    ['not-json', 'bad-answer', 200],
    ['error-400', 'bad-answer', 400],
    ['redirect', 'bad-answer', 302],
    ['reset', 'unreachable', undefined],
  ])('open-meteo: a %s answer is a %s failure (status %s)', async (behaviour, kind, status) => {
    fake.behave(behaviour);
    const failure = await failureOf(currentWeather());
    expect(failure.kind).toBe(kind);
    expect(failure.status).toBe(status);
  });

  it("open-meteo: the failure message carries Open-Meteo's reason when it answers 400", async () => {
    fake.behave('error-400');
    expect((await failureOf(currentWeather())).message).toMatch(/HTTP 400: Latitude must be in range/);
  });

  it.each<[FakeBehaviour, { delayMs?: number }]>([
    ['slow', { delayMs: 1500 }],
    ['hang', {}],
  ])('open-meteo: a %s upstream is a timeout failure when the signal times out', async (behaviour, options) => {
    fake.behave(behaviour, options);
    const started = performance.now();
    expect((await failureOf(currentWeather(200))).kind).toBe('timeout');
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('open-meteo: an unreachable failure when nothing listens', async () => {
    await fake.close();
    const failure = await failureOf(currentWeather());
    expect(failure.kind).toBe('unreachable');
    expect(failure.message).toMatch(/ECONNREFUSED/);
  });

  it.each<[string, Record<string, unknown>]>([
    ['temperature above 70 °C', { temperature_2m: 70.1 }],
    ['temperature below -100 °C', { temperature_2m: -100.5 }],
    ['humidity above 100 %', { relative_humidity_2m: 101 }],
    ['negative humidity', { relative_humidity_2m: -1 }],
    ['negative wind', { wind_speed_10m: -0.1 }],
    ['an unknown weather code', { weather_code: 4 }],
    ['a fractional weather code', { weather_code: 2.5 }],
    ['a temperature that is a string', { temperature_2m: '5.3' }],
    ['a missing humidity', { relative_humidity_2m: undefined }],
    ['a time with seconds', { time: '2026-11-23T14:00:00' }],
    ['a time with an offset', { time: '2026-11-23T14:00Z' }],
    ['a time that is no date', { time: '2026-02-30T14:00' }],
  ])('open-meteo: a bad-answer failure when the answer has %s', async (_what, values) => {
    fake.setCurrent(values as never);
    const failure = await failureOf(currentWeather());
    expect(failure.kind).toBe('bad-answer');
    expect(failure.message).toMatch(/^open-meteo answer refused: current\./);
  });

  it.each<[string, Record<string, unknown>]>([
    ['temperatures in °F', { current_units: { ...OPEN_METEO_UNITS, temperature_2m: '°F' } }],
    ['wind in mph', { current_units: { ...OPEN_METEO_UNITS, wind_speed_10m: 'mp/h' } }],
    ['times as unix seconds', { current_units: { ...OPEN_METEO_UNITS, time: 'unixtime' } }],
    ['no units', { current_units: undefined }],
    ['a UTC offset of one hour', { utc_offset_seconds: 3600 }],
    ['no current block', { current: undefined }],
  ])('open-meteo: a bad-answer failure when the answer has %s', async (_what, fields) => {
    fake.overrideAnswer(fields);
    expect((await failureOf(currentWeather())).kind).toBe('bad-answer');
  });
});
