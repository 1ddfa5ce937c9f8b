import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

/**
 * Load shedding, in-process: the app runs in the test's own process, so blocking the test's
 * event loop is blocking rowi's. Under pressure, API requests get a 503 problem with
 * Retry-After at once, and the health probes keep answering.
 */

const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

/** Keeps the event loop busy for `ms`, as a CPU-bound request would. */
function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

/** Waits (bounded) until the app's sampler reports pressure, or its absence; false when it did not within `ms`. */
async function pressureWithin(test: TestApp, ms: number, expected = true): Promise<boolean> {
  for (const started = performance.now(); performance.now() - started < ms; await pause(2)) {
    if (test.app.isUnderPressure() === expected) return true;
  }
  return false;
}

describe('load shedding on event-loop lag (ROWI_MAX_EVENT_LOOP_DELAY=20)', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '20' });
  });
  afterAll(async () => test?.close());

  it('GET /v1/users: 503 problem with Retry-After while the event loop lags, /health/live and /health/ready still 200, then 200 again', async () => {
    // The lag is sampled every 20 ms and shedding lasts one window: try a few times to land in one.
    let shed;
    let probes;
    for (let attempt = 0; attempt < 10 && shed?.status !== 503; attempt++) {
      blockEventLoop(300);
      if (!(await pressureWithin(test, 200))) continue;
      // Dispatched together, so all three meet the same pressure reading.
      const [users, live, ready] = await Promise.all([
        test.call({ url: '/v1/users' }),
        test.call({ url: '/health/live', key: null }),
        test.call({ url: '/health/ready', key: null }),
      ]);
      shed = users;
      probes = { live: live.status, ready: ready.status };
    }

    expect(shed, 'no request was shed in 10 attempts').toBeDefined();
    const problem = expectProblem(shed!, 503, 'service-unavailable');
    expect(problem.detail).toMatch(/overloaded/);
    expect(shed!.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(probes).toEqual({ live: 200, ready: 200 });

    expect(await pressureWithin(test, 500, false), 'the pressure passes once the lag does').toBe(true);
    expect((await test.call({ url: '/v1/users' })).status).toBe(200);
  });
});

describe('load shedding on heap use (ROWI_MAX_HEAP_USED=1, always above)', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_MAX_HEAP_USED: '1', ROWI_MAX_EVENT_LOOP_DELAY: '0' });
    // The first sample comes a second after start.
    expect(await pressureWithin(test, 3000)).toBe(true);
  });
  afterAll(async () => test?.close());

  it('POST /v1/users: 503 problem (JSON or XML as negotiated) with Retry-After, answered before the body is looked at; nothing stored', async () => {
    const before = await storedUsers(test);
    const started = performance.now();
    const reply = await test.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    expect(performance.now() - started).toBeLessThan(100);
    const problem = expectProblem(reply, 503, 'service-unavailable');
    expect(problem.detail).toMatch(/memory/);
    expect(reply.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(await storedUsers(test)).toEqual(before);

    const xml = await test.call({ url: '/v1/users', headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(503);
    expect(xml.mediaType).toBe('application/problem+xml');
    expect(xml.text).toContain('<type>/problems/service-unavailable</type>');
  });

  it('GET /health/live and /health/ready: 200 under pressure (probes are never shed)', async () => {
    const live = await test.call({ url: '/health/live', key: null });
    expect(live.status).toBe(200);
    expect(live.json).toMatchObject({ status: 'pass' });
    const ready = await test.call({ url: '/health/ready', key: null });
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({
      status: 'pass',
      checks: { database: { status: 'pass' }, migrations: { status: 'pass' } },
    });
  });

  it('GET /v1/users without credentials: 503, not 401 (shed before authentication costs anything)', async () => {
    const reply = await test.call({ url: '/v1/users', key: null });
    expectProblem(reply, 503, 'service-unavailable');
  });
});
