import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { upstreamWeatherFor } from '../../src/upstream/upstream-weather.js';
import type { FakeBehaviour } from '../helpers/fake-open-meteo.js';
import { BERLIN, startWeatherFront, WELLINGTON, type WeatherFront } from './upstream-weather.fixture.js';

/**
 * The cache in front of the provider: TTL, coalescing of concurrent lookups, stale-if-error,
 * LRU bound and close(), with the Cache-Status value (RFC 9211) each lookup reports.
 */

const fronts: WeatherFront[] = [];
async function front(options: Parameters<typeof startWeatherFront>[0] = {}): Promise<WeatherFront> {
  const started = await startWeatherFront(options);
  fronts.push(started);
  return started;
}
afterEach(async () => {
  for (const started of fronts.splice(0)) await started.close();
});

describe('upstream weather: cache', () => {
  it('lookup: a fresh answer is served without a provider call until its TTL ends, then fetched again', async () => {
    const { fake, weather, clock } = await front();
    const fetchedAt = clock.now;
    const first = await weather.lookup(BERLIN);
    expect(first).toMatchObject({
      ok: true,
      source: 'open-meteo',
      fetchedAt,
      ageSeconds: 0,
      ttlSeconds: 600,
      stale: false,
    });
    expect(first.cacheStatus).toBe('rowi; fwd=uri-miss; fwd-status=200; ttl=600; stored');
    expect(first.ok && first.weather).toMatchObject({
      temperature_c: 5.3,
      humidity_pct: 81,
      wind_kph: 12.2,
      conditions: 'overcast',
    });

    clock.now += 77_500;
    fake.setCurrent({ temperature_2m: 9.9 });
    const hit = await weather.lookup(BERLIN);
    expect(hit).toMatchObject({ ok: true, fetchedAt, ageSeconds: 77, stale: false, cacheStatus: 'rowi; hit; ttl=523' });
    expect(hit.ok && hit.weather.temperature_c).toBe(5.3);
    expect(fake.calls).toBe(1);

    clock.now = fetchedAt + 600_000;
    const refetched = await weather.lookup(BERLIN);
    expect(refetched).toMatchObject({
      ok: true,
      fetchedAt: clock.now,
      ageSeconds: 0,
      stale: false,
      cacheStatus: 'rowi; fwd=stale; fwd-status=200; ttl=600; stored',
    });
    expect(refetched.ok && refetched.weather.temperature_c).toBe(9.9);
    expect(fake.calls).toBe(2);
    expect(weather.calls).toBe(2);
  });

  it('lookup: 100 concurrent lookups of an uncached place make one provider call and share its answer', async () => {
    const { fake, weather } = await front();
    fake.behave('slow', { delayMs: 100 });
    const lookups = await Promise.all(Array.from({ length: 100 }, () => weather.lookup(BERLIN)));
    expect(fake.calls).toBe(1);
    expect(weather.calls).toBe(1);
    const weathers = lookups.map((lookup) => (lookup.ok ? lookup.weather : undefined));
    expect(new Set(weathers.map((each) => JSON.stringify(each))).size).toBe(1);
    expect(weathers[0]).toBeDefined();
    const statuses = lookups.map((lookup) => lookup.cacheStatus);
    expect(
      statuses.filter((status) => status === 'rowi; fwd=uri-miss; fwd-status=200; ttl=600; stored; collapsed'),
    ).toHaveLength(99);
    expect(statuses.filter((status) => status === 'rowi; fwd=uri-miss; fwd-status=200; ttl=600; stored')).toHaveLength(
      1,
    );
  });

  it('lookup: places are cached and fetched apart', async () => {
    const { fake, weather } = await front();
    await Promise.all([weather.lookup(BERLIN), weather.lookup(WELLINGTON), weather.lookup(BERLIN)]);
    expect(fake.calls).toBe(2);
    expect(fake.requests.map((url) => url.searchParams.get('latitude')).sort()).toEqual(['-41.29', '52.52']);
  });

  it('lookup: the least recently used place is evicted past maxEntries', async () => {
    const { fake, weather } = await front({ maxEntries: 2 });
    const paris = { latitude: 48.86, longitude: 2.35 };
    await weather.lookup(BERLIN);
    await weather.lookup(WELLINGTON);
    await weather.lookup(BERLIN);
    await weather.lookup(paris);
    expect(fake.calls).toBe(3);
    expect((await weather.lookup(BERLIN)).cacheStatus).toMatch(/; hit;/);
    expect((await weather.lookup(WELLINGTON)).cacheStatus).toMatch(/fwd=uri-miss/);
    expect(fake.calls).toBe(4);
  });
});

describe('upstream weather: failures', () => {
  it('lookup: a stale answer is served with the failure when the provider fails after the TTL', async () => {
    const { fake, weather, clock } = await front();
    const first = await weather.lookup(BERLIN);
    clock.now += 642_000;
    fake.behave('status-500');
    const stale = await weather.lookup(BERLIN);
    expect(stale).toMatchObject({
      ok: true,
      stale: true,
      ageSeconds: 642,
      failure: { kind: 'bad-answer', status: 500 },
    });
    expect(stale.cacheStatus).toBe('rowi; fwd=stale; fwd-status=500; ttl=-42; detail="upstream-bad-answer"');
    expect(stale.ok && first.ok && stale.weather).toEqual(first.ok && first.weather);

    // The failure poisoned nothing: the next lookup asks again, and gets the healed answer.
    fake.behave('normal');
    fake.setCurrent({ temperature_2m: 7.7 });
    const healed = await weather.lookup(BERLIN);
    expect(healed).toMatchObject({
      ok: true,
      stale: false,
      cacheStatus: 'rowi; fwd=stale; fwd-status=200; ttl=600; stored',
    });
    expect(healed.ok && healed.weather.temperature_c).toBe(7.7);
    expect(fake.calls).toBe(3);
  });

  it('lookup: a stale answer carries no fwd-status when the provider timed out', async () => {
    const { fake, weather, clock } = await front();
    await weather.lookup(BERLIN);
    clock.now += 601_000;
    fake.behave('hang');
    const stale = await weather.lookup(BERLIN);
    expect(stale).toMatchObject({ ok: true, stale: true, failure: { kind: 'timeout' } });
    expect(stale.cacheStatus).toBe('rowi; fwd=stale; ttl=-1; detail="upstream-timeout"');
  });

  it('lookup: the failure, and no answer, when the cached one is past TTL plus the stale limit', async () => {
    const { fake, weather, clock } = await front();
    await weather.lookup(BERLIN);
    clock.now += (600 + 3600 + 1) * 1000;
    fake.behave('status-500');
    const lookup = await weather.lookup(BERLIN);
    expect(lookup).toMatchObject({ ok: false, failure: { kind: 'bad-answer', status: 500 } });
    expect(lookup.cacheStatus).toBe('rowi; fwd=stale; fwd-status=500; detail="upstream-bad-answer"');
  });

  it.each<[FakeBehaviour, string, string]>([
    ['reset', 'unreachable', 'rowi; fwd=uri-miss; detail="upstream-unreachable"'],
    ['hang', 'timeout', 'rowi; fwd=uri-miss; detail="upstream-timeout"'],
    ['error-400', 'bad-answer', 'rowi; fwd=uri-miss; fwd-status=400; detail="upstream-bad-answer"'],
  ])('lookup: nothing cached and a %s upstream give a %s failure', async (behaviour, kind, cacheStatus) => {
    const { fake, weather } = await front();
    fake.behave(behaviour);
    const lookup = await weather.lookup(BERLIN);
    expect(lookup).toMatchObject({ ok: false, failure: { kind }, cacheStatus });
    fake.behave('normal');
    expect(await weather.lookup(BERLIN)).toMatchObject({ ok: true, stale: false });
  });

  it('lookup: lookups collapsed onto a failing call all get its failure, marked collapsed', async () => {
    const { fake, weather } = await front();
    fake.behave('hang');
    const lookups = await Promise.all(Array.from({ length: 5 }, () => weather.lookup(BERLIN)));
    expect(fake.calls).toBe(1);
    expect(lookups.map((lookup) => lookup.cacheStatus)).toEqual([
      'rowi; fwd=uri-miss; detail="upstream-timeout"',
      ...Array(4).fill('rowi; fwd=uri-miss; collapsed; detail="upstream-timeout"'),
    ]);
  });

  it('close: calls in flight are cancelled at once, and no call is made afterwards', async () => {
    const { fake, weather } = await front({ timeoutMs: 10_000 });
    fake.behave('hang');
    const pending = weather.lookup(BERLIN);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = performance.now();
    weather.close();
    expect(await pending).toMatchObject({ ok: false, failure: { kind: 'unreachable' } });
    expect(performance.now() - started).toBeLessThan(500);
    expect(await weather.lookup(WELLINGTON)).toMatchObject({ ok: false, failure: { kind: 'unreachable' } });
    expect(weather.calls).toBe(1);
    expect(weather.breakerState()).toBe('closed');
  });

  it('upstreamWeatherFor: nothing when no provider is configured, open-meteo when it is', () => {
    const log = pino({ level: 'silent' });
    expect(upstreamWeatherFor(loadConfig({}), log)).toBeUndefined();
    const configured = upstreamWeatherFor(
      loadConfig({ ROWI_WEATHER_PROVIDER: 'open-meteo', ROWI_WEATHER_URL: 'http://127.0.0.1:9' }),
      log,
    );
    expect(configured?.source).toBe('open-meteo');
    configured?.close();
  });
});
