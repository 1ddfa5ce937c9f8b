import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { fetchJson } from '../../src/upstream/fetch-json.js';
import { VERSION } from '../../src/version.js';
import { startFakeOpenMeteo, type FakeOpenMeteo } from '../helpers/fake-open-meteo.js';
import { failureOf } from './expect-failure.js';

/** The JSON GET under every provider: headers sent, size cap, redirects and cancellation. */

const MEGABYTE = 1_048_576;

let fake: FakeOpenMeteo;
beforeEach(async () => {
  fake = await startFakeOpenMeteo();
});
afterEach(async () => {
  await fake.close();
});

const forecast = () => new URL('/v1/forecast?latitude=1&longitude=2', fake.url);

it('fetchJson: asks for JSON as rowi/<version>, and returns status and parsed body', async () => {
  const { status, body } = await fetchJson(forecast(), { signal: AbortSignal.timeout(2000), maxBytes: MEGABYTE });
  expect(status).toBe(200);
  expect(body).toMatchObject({ latitude: 1, longitude: 2, current: { weather_code: 3 } });
  expect(fake.requestHeaders[0]).toMatchObject({ accept: 'application/json', 'user-agent': `rowi/${VERSION}` });
});

it('fetchJson: an error status with a JSON body is returned for the provider to read', async () => {
  fake.behave('error-400');
  const { status, body } = await fetchJson(forecast(), { signal: AbortSignal.timeout(2000), maxBytes: MEGABYTE });
  expect(status).toBe(400);
  expect(body).toMatchObject({ error: true, reason: expect.stringContaining('Latitude') });
});

it('fetchJson: bad-answer before reading the body when Content-Length announces more than maxBytes', async () => {
  const failure = await failureOf(fetchJson(forecast(), { signal: AbortSignal.timeout(2000), maxBytes: 100 }));
  expect(failure.kind).toBe('bad-answer');
  expect(failure.message).toMatch(/larger than 100 bytes/);
});

it('fetchJson: a 5 MB chunked body is cut off past 1 MB, without reading the rest', async () => {
  fake.behave('huge');
  const started = performance.now();
  const failure = await failureOf(fetchJson(forecast(), { signal: AbortSignal.timeout(5000), maxBytes: MEGABYTE }));
  expect(failure.kind).toBe('bad-answer');
  expect(failure.message).toMatch(/larger than 1048576 bytes/);
  expect(performance.now() - started).toBeLessThan(2000);
  // The fake saw the connection close before it had sent the whole body.
  await vi.waitFor(() => expect(fake.closedEarly).toBe(1));
});

it('fetchJson: a redirect is a bad answer and is not followed', async () => {
  fake.behave('redirect');
  const failure = await failureOf(fetchJson(forecast(), { signal: AbortSignal.timeout(2000), maxBytes: MEGABYTE }));
  expect(failure).toMatchObject({ kind: 'bad-answer', status: 302 });
  expect(failure.message).toMatch(/redirected/);
  expect(fake.calls).toBe(1);
});

it('fetchJson: unreachable, not timeout, when the signal aborts for another reason', async () => {
  fake.behave('hang');
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  const failure = await failureOf(fetchJson(forecast(), { signal: controller.signal, maxBytes: MEGABYTE }));
  expect(failure.kind).toBe('unreachable');
  expect(failure.message).toMatch(/cancelled/);
});
