import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { startFakeOpenMeteo, type FakeBehaviour, type FakeOpenMeteo } from '../helpers/fake-open-meteo.js';
import { weatherHelpers } from '../helpers/weather.js';
import { keptLog } from '../helpers/log.js';

/**
 * GET /v1/weather/{place} with the upstream provider on, against a real HTTP server on loopback
 * playing Open-Meteo (test/helpers/fake-open-meteo.ts): what callers see when the provider
 * answers, is slow, fails in each way an upstream fails, and heals. SQLite only: storage is the
 * same as for recorded weather (test/resources/weather.*, run on both databases).
 */
let fake: FakeOpenMeteo;
beforeAll(async () => {
  fake = await startFakeOpenMeteo();
});
afterAll(() => fake.close());

const apps: TestApp[] = [];
afterAll(() => Promise.all(apps.map((app) => app.close())));

async function appWith(settings: Record<string, string> = {}): Promise<TestApp> {
  const app = await startApp({
    ROWI_WEATHER_PROVIDER: 'open-meteo',
    ROWI_WEATHER_URL: fake.url,
    ROWI_WEATHER_TIMEOUT: '300',
    ...settings,
  });
  apps.push(app);
  return app;
}

let coordinate = 0;
/** A new place with coordinates no other test uses (the cache is keyed by coordinates). */
async function placeWithCoordinates(test: TestApp, slug: string): Promise<{ latitude: number; longitude: number }> {
  coordinate++;
  const at = { latitude: 10 + coordinate / 100, longitude: 20 + coordinate / 100 };
  const reply = await test.call({ method: 'PATCH', url: `/v1/weather/${slug}`, body: { name: slug, ...at } });
  expect(reply.status).toBe(201);
  return at;
}

function header(reply: Reply, name: string): string {
  return String(reply.headers[name] ?? '');
}

describe('GET /v1/weather/{place} from the provider', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await appWith({ ROWI_WEATHER_CACHE_TTL: '600', ROWI_WEATHER_BREAKER_FAILURES: '1000' });
  });

  it("GET /v1/weather/{place}: 200 with the provider's current weather mapped to rowi's fields, cached for the TTL (Cache-Control, Age, Cache-Status)", async () => {
    fake.behave('normal');
    fake.setCurrent({
      time: '2026-11-23T14:15',
      temperature_2m: -3.5,
      relative_humidity_2m: 64,
      wind_speed_10m: 27.4,
      weather_code: 73,
    });
    const at = await placeWithCoordinates(test, 'oslo');
    const callsBefore = fake.calls;

    const first = await test.call({ url: '/v1/weather/Oslo' });

    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      place: 'oslo',
      name: 'oslo',
      ...at,
      temperature_c: -3.5,
      humidity_pct: 64,
      wind_kph: 27.4,
      conditions: 'snow',
      observed_at: '2026-11-23T14:15:00.000Z',
      source: 'open-meteo',
      stale: false,
    });
    expect(header(first, 'cache-control')).toBe('private, max-age=600');
    expect(header(first, 'age')).toBe('0');
    expect(header(first, 'cache-status')).toMatch(/^rowi; fwd=uri-miss; fwd-status=200; ttl=600; stored$/);
    expect(header(first, 'etag')).toMatch(/^W\/"v1-u[0-9a-z]+"$/);
    expect(fake.calls).toBe(callsBefore + 1);
    // The documented request: /v1/forecast with the current variables, km/h and GMT.
    const request = fake.requests.at(-1)!;
    expect(request.pathname).toBe('/v1/forecast');
    expect(Number(request.searchParams.get('latitude'))).toBe(at.latitude);
    expect(Number(request.searchParams.get('longitude'))).toBe(at.longitude);
    expect(request.searchParams.get('current')!.split(',').sort()).toEqual([
      'relative_humidity_2m',
      'temperature_2m',
      'weather_code',
      'wind_speed_10m',
    ]);
    expect(request.searchParams.get('wind_speed_unit')).toBe('kmh');

    const second = await test.call({ url: '/v1/weather/oslo' });
    expect(second.status).toBe(200);
    expect(second.json).toEqual(first.json);
    expect(header(second, 'cache-status')).toMatch(/^rowi; hit; ttl=(600|599)$/);
    expect(fake.calls).toBe(callsBefore + 1);

    const revalidated = await test.call({
      url: '/v1/weather/oslo',
      headers: { 'if-none-match': header(first, 'etag') },
    });
    expect(revalidated.status).toBe(304);
    expect(fake.calls).toBe(callsBefore + 1);
  });

  it("GET /v1/weather/{place}: 200 with the recorded observation when it is newer than the provider's", async () => {
    fake.behave('normal');
    fake.setCurrent({ time: '2026-11-23T09:00' });
    await placeWithCoordinates(test, 'bergen');
    const put = await test.call({
      method: 'PUT',
      url: '/v1/weather/bergen',
      body: {
        temperature_c: 8,
        humidity_pct: 90,
        wind_kph: 30,
        conditions: 'rain',
        observed_at: new Date().toISOString(),
      },
    });
    expect(put.status).toBe(200);

    const reply = await test.call({ url: '/v1/weather/bergen' });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ temperature_c: 8, conditions: 'rain', source: 'admin', stale: false });
    expect(header(reply, 'cache-control')).toBe('private, no-cache');
    expect(header(reply, 'etag')).toBe(put.headers.etag);
    expect(header(reply, 'cache-status')).toContain('stored');
  });

  it('GET /v1/weather/{place}: 100 concurrent reads of an uncached place make one provider call', async () => {
    fake.behave('slow', { delayMs: 150 });
    await placeWithCoordinates(test, 'trondheim');
    const callsBefore = fake.calls;

    const replies = await Promise.all(Array.from({ length: 100 }, () => test.call({ url: '/v1/weather/trondheim' })));

    expect(fake.calls - callsBefore).toBe(1);
    expect(replies.map((reply) => reply.status)).toEqual(Array(100).fill(200));
    expect(new Set(replies.map((reply) => reply.text)).size).toBe(1);
    expect(replies.filter((reply) => header(reply, 'cache-status').includes('collapsed'))).toHaveLength(99);
  });

  const failures: [FakeBehaviour, number, string, string][] = [
    ['slow', 504, 'upstream-timeout', 'timeout'],
    ['hang', 504, 'upstream-timeout', 'timeout'],
    ['status-500', 502, 'upstream-error', 'bad-answer'],
    ['malformed-json', 502, 'upstream-error', 'bad-answer'],
    ['truncated', 502, 'upstream-error', 'bad-answer'],
    ['huge', 502, 'upstream-error', 'bad-answer'],
    ['not-json', 502, 'upstream-error', 'bad-answer'],
    ['error-400', 502, 'upstream-error', 'bad-answer'],
    ['reset', 502, 'upstream-error', 'unreachable'],
  ];
  it.each(failures)(
    'GET /v1/weather/{place}: when the provider answers "%s" and nothing is cached, then %i %s, and nothing stored changes',
    async (behaviour, status, type, kind) => {
      const slug = `fails-${behaviour}`;
      await placeWithCoordinates(test, slug);
      const { storedWeather } = weatherHelpers(() => test);
      const before = await storedWeather();
      fake.behave(behaviour, { delayMs: 1000 });
      const started = Date.now();

      const reply = await test.call({ url: `/v1/weather/${slug}` });

      const problem = expectProblem(reply, status, type);
      expect(problem).toMatchObject({ provider: 'open-meteo', failure: kind, instance: `/v1/weather/${slug}` });
      expect(header(reply, 'cache-status')).toMatch(
        new RegExp(`^rowi; fwd=uri-miss(; fwd-status=\\d+)?; detail="upstream-${kind}"$`),
      );
      // Within the 300 ms time-out (plus scheduling), whatever the provider does.
      expect(Date.now() - started).toBeLessThan(2000);
      expect(await storedWeather()).toEqual(before);
      fake.behave('normal');
    },
  );

  it("GET /v1/weather/{place}: 502 names the provider's status when it answered 500", async () => {
    await placeWithCoordinates(test, 'status-named');
    fake.behave('status-500');
    const reply = await test.call({ url: '/v1/weather/status-named' });
    expect(expectProblem(reply, 502, 'upstream-error').upstream_status).toBe(500);
    expect(header(reply, 'cache-status')).toBe('rowi; fwd=uri-miss; fwd-status=500; detail="upstream-bad-answer"');
    fake.behave('normal');
  });

  it('GET /v1/weather/{place}: the recorded observation is served marked stale when the provider fails and nothing is cached', async () => {
    await placeWithCoordinates(test, 'recorded-fallback');
    await test.call({
      method: 'PUT',
      url: '/v1/weather/recorded-fallback',
      body: { temperature_c: 1, humidity_pct: 50, wind_kph: 3, conditions: 'fog', observed_at: '2026-11-01T00:00:00Z' },
    });
    fake.behave('status-500');

    const reply = await test.call({ url: '/v1/weather/recorded-fallback' });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ temperature_c: 1, conditions: 'fog', source: 'admin', stale: true });
    expect(header(reply, 'cache-status')).toContain('detail="upstream-bad-answer"');
    expect(header(reply, 'etag')).toMatch(/^W\//);
    fake.behave('normal');
  });

  it('GET /v1/weather/{place}: without coordinates the provider is not asked', async () => {
    const callsBefore = fake.calls;
    await test.call({
      method: 'PUT',
      url: '/v1/weather/no-coordinates',
      body: {
        temperature_c: 12,
        humidity_pct: 40,
        wind_kph: 5,
        conditions: 'clear',
        observed_at: '2026-11-20T10:00:00Z',
      },
    });

    const reply = await test.call({ url: '/v1/weather/no-coordinates' });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ source: 'admin', stale: false, latitude: null });
    expect(reply.headers['cache-status']).toBeUndefined();
    expect(fake.calls).toBe(callsBefore);
  });
});

describe('GET /v1/weather/{place}: stale-if-error', () => {
  it('GET /v1/weather/{place}: when the TTL has passed and the provider fails, then 200 with the cached weather, stale: true, its Age, and Cache-Status saying why; fresh again once the provider heals', async () => {
    const test = await appWith({ ROWI_WEATHER_CACHE_TTL: '1', ROWI_WEATHER_BREAKER_FAILURES: '1000' });
    fake.behave('normal');
    fake.setCurrent({ time: '2026-11-23T12:00', temperature_2m: 20 });
    await placeWithCoordinates(test, 'lisbon');
    const fresh = await test.call({ url: '/v1/weather/lisbon' });
    expect(fresh.json).toMatchObject({ temperature_c: 20, stale: false });
    await new Promise((resolve) => setTimeout(resolve, 2100));

    for (const [behaviour, detail] of [
      ['status-500', 'upstream-bad-answer'],
      ['hang', 'upstream-timeout'],
      ['reset', 'upstream-unreachable'],
    ] as const) {
      fake.behave(behaviour);
      const stale = await test.call({ url: '/v1/weather/lisbon' });
      expect(stale.status).toBe(200);
      expect(stale.json).toEqual({ ...fresh.json, stale: true });
      expect(header(stale, 'cache-control')).toBe('private, no-cache');
      expect(Number(header(stale, 'age'))).toBeGreaterThanOrEqual(2);
      expect(header(stale, 'cache-status')).toMatch(
        new RegExp(`^rowi; fwd=stale(; fwd-status=500)?; ttl=-\\d+; detail="${detail}"$`),
      );
      expect(stale.headers.warning).toBeUndefined();
    }

    fake.behave('normal');
    fake.setCurrent({ time: '2026-11-23T12:15', temperature_2m: 21 });
    const healed = await test.call({ url: '/v1/weather/lisbon' });
    expect(healed.json).toMatchObject({ temperature_c: 21, observed_at: '2026-11-23T12:15:00.000Z', stale: false });
    expect(header(healed, 'cache-status')).toMatch(/^rowi; fwd=stale; fwd-status=200; ttl=1; stored$/);
  });
});

describe('GET /v1/weather/{place}: circuit breaker', () => {
  it('GET /v1/weather/{place}: after 3 failures in a row the provider is not called for the cool-down (502 circuit-open with Retry-After); one trial call after it; closed again once it answers', async () => {
    const test = await appWith({ ROWI_WEATHER_BREAKER_FAILURES: '3', ROWI_WEATHER_BREAKER_COOLDOWN: '1000' });
    await placeWithCoordinates(test, 'madrid');
    fake.behave('status-500');
    const callsBefore = fake.calls;

    for (let attempt = 0; attempt < 3; attempt++)
      expectProblem(await test.call({ url: '/v1/weather/madrid' }), 502, 'upstream-error');
    expect(fake.calls - callsBefore).toBe(3);

    const refused = await test.call({ url: '/v1/weather/madrid' });
    expect(expectProblem(refused, 502, 'upstream-error').failure).toBe('circuit-open');
    expect(Number(header(refused, 'retry-after'))).toBeGreaterThanOrEqual(1);
    expect(header(refused, 'cache-status')).toBe('rowi; detail="circuit-open"');
    expect(fake.calls - callsBefore).toBe(3);
    const ready = await test.call({ url: '/health/ready', key: null });
    expect(ready.status).toBe(200);
    expect(ready.json.checks.weather_provider).toEqual({
      status: 'warn',
      duration_ms: 0,
      output: 'open-meteo failed repeatedly: its circuit breaker is open',
    });

    await new Promise((resolve) => setTimeout(resolve, 1100));
    const trial = await test.call({ url: '/v1/weather/madrid' });
    expectProblem(trial, 502, 'upstream-error');
    expect(fake.calls - callsBefore).toBe(4);
    expect(test.app.weather?.breakerState()).toBe('open');

    await new Promise((resolve) => setTimeout(resolve, 1100));
    fake.behave('normal');
    const healed = await test.call({ url: '/v1/weather/madrid' });
    expect(healed.status).toBe(200);
    expect(healed.json.source).toBe('open-meteo');
    expect(fake.calls - callsBefore).toBe(5);
    expect((await test.call({ url: '/health/ready', key: null })).json.checks.weather_provider).toEqual({
      status: 'pass',
      duration_ms: 0,
    });
  });
});

describe('GET /v1/weather/{place} without a provider', () => {
  it('GET /v1/weather/{place}: a place with coordinates is served from its recorded observations when ROWI_WEATHER_PROVIDER is unset', async () => {
    const test = await startApp();
    apps.push(test);
    const callsBefore = fake.calls;
    await placeWithCoordinates(test, 'rome');

    const reply = await test.call({ url: '/v1/weather/rome' });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      place: 'rome',
      temperature_c: null,
      conditions: null,
      observed_at: null,
      source: null,
      stale: false,
    });
    expect(header(reply, 'cache-control')).toBe('private, no-cache');
    expect(header(reply, 'age')).toBe('0');
    expect(fake.calls).toBe(callsBefore);
  });
});

describe('GET /v1/weather/{place}: a circuit breaker that opens at the first failure', () => {
  it('GET /v1/weather/{place}: the log says the breaker opened after a failure, not "after 1 failures in a row", when ROWI_WEATHER_BREAKER_FAILURES=1', async () => {
    const { log, logger } = keptLog('info');
    const test = await startApp(
      {
        ROWI_WEATHER_PROVIDER: 'open-meteo',
        ROWI_WEATHER_URL: fake.url,
        ROWI_WEATHER_TIMEOUT: '300',
        ROWI_WEATHER_BREAKER_FAILURES: '1',
        ROWI_WEATHER_BREAKER_COOLDOWN: '60000',
      },
      logger,
    );
    apps.push(test);
    await placeWithCoordinates(test, 'oslo');
    fake.behave('status-500');
    expectProblem(await test.call({ url: '/v1/weather/oslo' }), 502, 'upstream-error');
    const refused = await test.call({ url: '/v1/weather/oslo' });
    expect(expectProblem(refused, 502, 'upstream-error').failure).toBe('circuit-open');
    const opened = log.filter((line) => line.msg.startsWith('circuit breaker open')).map((line) => line.msg);
    expect(opened).toEqual([expect.stringMatching(/ms after a failure$/)]);
    fake.behave('normal');
  });
});
