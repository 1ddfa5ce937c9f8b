import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenMeteo, type FakeOpenMeteo } from '../helpers/fake-open-meteo.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createUser } from '../helpers/records.js';
import { sample } from '../helpers/metrics.js';

let test: TestApp;
let fake: FakeOpenMeteo;
beforeAll(async () => {
  fake = await startFakeOpenMeteo();
  test = await startApp({
    ROWI_WEATHER_PROVIDER: 'open-meteo',
    ROWI_WEATHER_URL: fake.url,
    ROWI_WEATHER_TIMEOUT: '300',
    ROWI_WEATHER_CACHE_TTL: '600',
    ROWI_WEATHER_BREAKER_FAILURES: '2',
    ROWI_WEATHER_BREAKER_COOLDOWN: '60000',
    ROWI_RATE_LIMIT_READER: '3',
  });
});
afterAll(async () => {
  await test.close();
  await fake.close();
});

const scrape = async () => {
  const reply = await test.call({ url: '/metrics' });
  expect(reply.status).toBe(200);
  return reply.text;
};

describe('GET /metrics', () => {
  it('GET /metrics: 200 in the Prometheus text format (0.0.4) for an admin, whatever Accept says, never cached', async () => {
    const reply = await test.call({ url: '/metrics', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.text).toMatch(/^# HELP /m);
    for (const name of [
      'rowi_http_request_duration_seconds',
      'rowi_http_requests_in_flight',
      'rowi_db_transaction_duration_seconds',
      'rowi_rate_limit_rejections_total',
      'rowi_auth_failures_total',
      'rowi_weather_upstream_calls_total',
      'rowi_weather_cache_lookups_total',
      'rowi_weather_breaker_state',
      'nodejs_eventloop_lag_p99_seconds',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
    ]) {
      expect(reply.text, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
  });

  it('GET /metrics: 401 without credentials, 403 insufficient-scope for a reader; a caller granted metrics:read may scrape', async () => {
    expectProblem(await test.call({ url: '/metrics', key: null }), 401, 'missing-credentials');
    const reader = await createCallerWithKey(test, { role: 'reader' });
    const refused = await test.call({ url: '/metrics', key: reader.key });
    expectProblem(refused, 403, 'insufficient-scope');
    expect(refused.json.required_scopes).toEqual(['metrics:read']);
    const scraper = await createCallerWithKey(test, { role: 'reader', extra_scopes: ['metrics:read'] });
    expect((await test.call({ url: '/metrics', key: scraper.key })).status).toBe(200);
  });

  it('requests are counted by route template (never the concrete path), method and status class', async () => {
    const { user } = await createUser(test, { name: 'Counted', email: 'counted@example.com' });
    const labels = (status: string) => ({ route: '/v1/users/{id}', method: 'GET', status_class: status });
    const before = await scrape();
    for (let index = 0; index < 3; index++) expect((await test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);
    expect((await test.call({ url: '/v1/users/999999' })).status).toBe(404);
    const after = await scrape();
    expect(
      sample(after, 'rowi_http_request_duration_seconds_count', labels('2xx')) -
        sample(before, 'rowi_http_request_duration_seconds_count', labels('2xx')),
    ).toBe(3);
    expect(
      sample(after, 'rowi_http_request_duration_seconds_count', labels('4xx')) -
        sample(before, 'rowi_http_request_duration_seconds_count', labels('4xx')),
    ).toBe(1);
    expect(after).not.toContain(`/v1/users/${user.id}"`);
    // The scrape itself is in flight while it is answered.
    expect(sample(after, 'rowi_http_requests_in_flight')).toBeGreaterThanOrEqual(1);
  });

  it('units of work are timed by outcome; authentication failures are counted by kind', async () => {
    const before = await scrape();
    await createUser(test, { name: 'Timed', email: 'timed@example.com' });
    expect((await test.call({ url: '/v1/users', key: 'rowi_not-a-key' })).status).toBe(401);
    expect((await test.call({ url: '/v1/users', key: null })).status).toBe(401);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(delta('rowi_db_transaction_duration_seconds_count', { outcome: 'committed' })).toBeGreaterThanOrEqual(1);
    expect(delta('rowi_auth_failures_total', { kind: 'invalid-credentials' })).toBe(1);
    expect(delta('rowi_auth_failures_total', { kind: 'missing-credentials' })).toBe(1);
  });

  it('rate-limit refusals are counted by policy', async () => {
    const reader = await createCallerWithKey(test, { role: 'reader' });
    const before = await scrape();
    const statuses = [];
    for (let index = 0; index < 5; index++)
      statuses.push((await test.call({ url: '/v1/users', key: reader.key })).status);
    expect(statuses.filter((status) => status === 429)).toHaveLength(2);
    const after = await scrape();
    // The reader's quota is the "caller" policy's (docs/limits.md).
    expect(
      sample(after, 'rowi_rate_limit_rejections_total', { policy: 'caller' }) -
        sample(before, 'rowi_rate_limit_rejections_total', { policy: 'caller' }),
    ).toBe(2);
  });

  it("weather: provider calls by outcome, cache lookups by result, and the breaker's state", async () => {
    expect(
      (
        await test.call({
          method: 'PATCH',
          url: '/v1/weather/metrics-town',
          body: { name: 'metrics-town', latitude: 11.5, longitude: 22.5 },
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await test.call({
          method: 'PATCH',
          url: '/v1/weather/failing-town',
          body: { name: 'failing-town', latitude: 12.5, longitude: 23.5 },
        })
      ).status,
    ).toBe(201);
    const before = await scrape();
    const delta = (after: string, name: string, labels: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    fake.behave('normal');
    expect((await test.call({ url: '/v1/weather/metrics-town' })).status).toBe(200);
    expect((await test.call({ url: '/v1/weather/metrics-town' })).status).toBe(200);
    const served = await scrape();
    expect(delta(served, 'rowi_weather_upstream_calls_total', { outcome: 'ok' })).toBe(1);
    expect(delta(served, 'rowi_weather_cache_lookups_total', { result: 'miss' })).toBe(1);
    expect(delta(served, 'rowi_weather_cache_lookups_total', { result: 'hit' })).toBe(1);
    expect(sample(served, 'rowi_weather_breaker_state', { state: 'closed' })).toBe(1);

    fake.behave('status-500');
    for (let index = 0; index < 2; index++) await test.call({ url: '/v1/weather/failing-town' });
    const failing = await scrape();
    expect(delta(failing, 'rowi_weather_upstream_calls_total', { outcome: 'bad-answer' })).toBe(2);
    expect(sample(failing, 'rowi_weather_breaker_state', { state: 'open' })).toBe(1);
    expect(sample(failing, 'rowi_weather_breaker_state', { state: 'closed' })).toBe(0);
    fake.behave('normal');
  });
});

const PROMTOOL = '/usr/bin/promtool';
const promtoolMissing = !existsSync(PROMTOOL);
if (promtoolMissing) {
  if (process.env.ROWI_TEST_PROMTOOL === 'required')
    throw new Error(`${PROMTOOL} is not installed (apt-get install prometheus), and ROWI_TEST_PROMTOOL=required`);
  console.warn(
    `\n[rowi tests] ${PROMTOOL} is not installed (apt-get install prometheus): the promtool check of /metrics is SKIPPED (.ci/run installs it).\n`,
  );
}

describe.skipIf(promtoolMissing)('GET /metrics and promtool', () => {
  it("the exposition passes `promtool check metrics` (format and Prometheus's naming rules)", async () => {
    const text = await scrape();
    const checked = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(`${checked.stdout}${checked.stderr}`).toBe('');
    expect(checked.status).toBe(0);
  });
});
