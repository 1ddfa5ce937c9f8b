import { afterEach, describe, expect, it } from 'vitest';
import type { FakeBehaviour } from '../helpers/fake-open-meteo.js';
import { BERLIN, PINO_WARN, startWeatherFront, WELLINGTON, type WeatherFront } from './upstream-weather.fixture.js';

/**
 * The circuit breaker in front of the provider (3 failures, 30 s cooldown here): no calls while
 * open, one trial after the cooldown, recovery, stale answers meanwhile, and quiet logs.
 */

const fronts: WeatherFront[] = [];
async function front(): Promise<WeatherFront> {
  const started = await startWeatherFront();
  fronts.push(started);
  return started;
}
afterEach(async () => {
  for (const started of fronts.splice(0)) await started.close();
});

const places = (count: number) => Array.from({ length: count }, (_, index) => ({ latitude: index, longitude: index }));

describe('upstream weather: circuit breaker', () => {
  it.each<[FakeBehaviour, string]>([
    ['status-500', 'bad-answer'],
    ['hang', 'timeout'],
    ['reset', 'unreachable'],
  ])('breaker: opens after 3 %s failures, then lookups get circuit-open without a call', async (behaviour, kind) => {
    const { fake, weather, clock } = await front();
    fake.behave(behaviour);
    for (const place of places(3)) expect(await weather.lookup(place)).toMatchObject({ ok: false, failure: { kind } });
    expect(weather.breakerState()).toBe('open');
    expect(fake.calls).toBe(3);

    clock.now += 10_500;
    for (const place of places(10)) {
      const refused = await weather.lookup(place);
      expect(refused).toMatchObject({
        ok: false,
        failure: { kind: 'circuit-open', retryAfterSeconds: 20 },
        cacheStatus: 'rowi; detail="circuit-open"',
      });
    }
    expect(fake.calls).toBe(3);
    expect(weather.calls).toBe(3);
  });

  it('breaker: a 400 for one place (the provider refusing that request) never opens it for the others', async () => {
    const { fake, weather } = await front();
    fake.behave('error-400');
    for (const place of places(5))
      expect(await weather.lookup(place)).toMatchObject({ ok: false, failure: { kind: 'bad-answer', status: 400 } });
    expect(weather.breakerState()).toBe('closed');
    expect(fake.calls).toBe(5);

    fake.behave('normal');
    expect(await weather.lookup(BERLIN)).toMatchObject({ ok: true, stale: false });
  });

  it('breaker: after the cooldown exactly one trial call; its failure opens the circuit again', async () => {
    const { fake, weather, clock } = await front();
    fake.behave('status-500');
    for (const place of places(3)) await weather.lookup(place);
    clock.now += 30_000;
    expect(weather.breakerState()).toBe('half-open');

    const lookups = await Promise.all([BERLIN, WELLINGTON, ...places(3)].map((place) => weather.lookup(place)));
    expect(fake.calls).toBe(4);
    expect(lookups.map((lookup) => !lookup.ok && lookup.failure.kind)).toEqual([
      'bad-answer',
      'circuit-open',
      'circuit-open',
      'circuit-open',
      'circuit-open',
    ]);
    expect(weather.breakerState()).toBe('open');
    expect(await weather.lookup(BERLIN)).toMatchObject({
      ok: false,
      failure: { kind: 'circuit-open', retryAfterSeconds: 30 },
    });
  });

  it('breaker: a successful trial closes the circuit and fresh values are served again', async () => {
    const { fake, weather, clock } = await front();
    fake.behave('status-500');
    for (const place of places(3)) await weather.lookup(place);
    clock.now += 30_000;
    fake.behave('normal');
    fake.setCurrent({ temperature_2m: 11.1 });

    const trial = await weather.lookup(BERLIN);
    expect(trial).toMatchObject({
      ok: true,
      stale: false,
      cacheStatus: 'rowi; fwd=uri-miss; fwd-status=200; ttl=600; stored',
    });
    expect(trial.ok && trial.weather.temperature_c).toBe(11.1);
    expect(weather.breakerState()).toBe('closed');
    expect(await weather.lookup(WELLINGTON)).toMatchObject({ ok: true, stale: false });
    expect(fake.calls).toBe(5);
  });

  it('breaker: a cached answer is served stale, as a hit with detail circuit-open, while the circuit is open', async () => {
    const { fake, weather, clock } = await front();
    await weather.lookup(BERLIN);
    clock.now += 700_000;
    fake.behave('status-500');
    for (const place of places(3)) await weather.lookup(place);
    const stale = await weather.lookup(BERLIN);
    expect(stale).toMatchObject({
      ok: true,
      stale: true,
      ageSeconds: 700,
      failure: { kind: 'circuit-open', retryAfterSeconds: 30 },
    });
    expect(stale.cacheStatus).toBe('rowi; hit; ttl=-100; detail="circuit-open"');
    expect(fake.calls).toBe(4);
  });

  it('breaker: a success between failures resets the count', async () => {
    const { fake, weather } = await front();
    const [first, second, third, fourth, fifth] = places(5);
    fake.behave('status-500');
    await weather.lookup(first!);
    await weather.lookup(second!);
    fake.behave('normal');
    await weather.lookup(third!);
    fake.behave('status-500');
    await weather.lookup(fourth!);
    await weather.lookup(fifth!);
    expect(weather.breakerState()).toBe('closed');
  });

  it('logs: one warning when the provider starts failing and one when the circuit opens, not one per lookup', async () => {
    const { fake, weather, clock, logs } = await front();
    fake.behave('status-500');
    for (const place of places(3)) await weather.lookup(place);
    for (const place of places(50)) await weather.lookup(place);
    const warnings = logs.filter((line) => line.level >= PINO_WARN).map((line) => line.msg);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^weather provider open-meteo fails: open-meteo answered HTTP 500/);
    expect(warnings[1]).toMatch(/^circuit breaker open/);

    clock.now += 30_000;
    fake.behave('normal');
    await weather.lookup(BERLIN);
    expect(logs.at(-1)?.msg).toBe('weather provider open-meteo answers again');
    expect(logs.filter((line) => line.level >= PINO_WARN)).toHaveLength(2);
  });
});
