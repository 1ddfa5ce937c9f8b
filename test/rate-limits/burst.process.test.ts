import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeSettings } from '../../src/config/config.js';
import { startServer, type RunningServer } from '../helpers/process.js';

/**
 * A burst against the built CLI over real sockets (`npm test` builds first), with the default
 * limits (rate limits included): 2,000 requests at once, half reads and half writes, all as the admin. rowi answers each
 * (200/201, or 429 from a rate limit, or 503 from load shedding; never a 500), stays up, and its
 * memory comes back down afterwards rather than holding what the burst queued.
 */

const BURST = 2000;
const ALLOWED = [200, 201, 429, 503];
const MIB = 1024 * 1024;
const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

/** The shipped rate limits (the test helpers turn them off unless told otherwise). */
const DEFAULT_RATE_LIMITS = Object.fromEntries(
  describeSettings()
    .filter((setting) => setting.env.startsWith('ROWI_RATE_LIMIT_') || setting.env === 'ROWI_AUTH_FAILURE_LIMIT')
    .map((setting) => [setting.env, String(setting.default)]),
);

/** The server's resident set, from /proc (Linux), in bytes. */
function rssOf(server: RunningServer): number {
  const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error('no VmRSS in /proc/<pid>/status');
  return Number(match[1]) * 1024;
}

describe.runIf(process.platform === 'linux')('a burst of 2,000 concurrent requests, over real sockets', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ env: DEFAULT_RATE_LIMITS });
  });
  afterAll(async () => {
    if (server.child.exitCode === null) expect(await server.stop()).toBe(0);
  });

  it(
    'GET and POST /v1/users: only 200/201/429/503, never a 500 or a dropped connection; the process stays up and its memory comes back down',
    { timeout: 40_000 },
    async () => {
      const headers = { 'x-api-key': server.adminKey, 'content-type': 'application/json' };
      // Warm up (JIT, caches, statement cache), then take the baseline.
      for (let index = 0; index < 50; index++) {
        const reply = await fetch(`${server.baseUrl}/v1/users?limit=10`, { headers });
        await reply.arrayBuffer();
      }
      await pause(500);
      const baseline = rssOf(server);

      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, rssOf(server))), 50);
      const started = performance.now();
      const outcomes = await Promise.all(
        Array.from({ length: BURST }, async (_, index) => {
          try {
            const reply =
              index % 2 === 0
                ? await fetch(`${server.baseUrl}/v1/users?limit=10`, { headers })
                : await fetch(`${server.baseUrl}/v1/users`, {
                    method: 'POST',
                    headers,
                    body: JSON.stringify({ name: `Burst ${index}`, email: `burst${index}@example.com` }),
                  });
            const body = await reply.text();
            return { status: reply.status, body };
          } catch (error) {
            return { status: 0, body: String((error as Error).cause ?? error) };
          }
        }),
      );
      const burstMs = performance.now() - started;
      clearInterval(sampler);

      const counts: Record<number, number> = {};
      for (const { status } of outcomes) counts[status] = (counts[status] ?? 0) + 1;
      console.log(
        `burst of ${BURST}: ${Math.round(burstMs)} ms, statuses ${JSON.stringify(counts)}, RSS baseline ${Math.round(baseline / MIB)} MiB, peak ${Math.round(peak / MIB)} MiB`,
      );
      expect(outcomes.filter(({ status }) => !ALLOWED.includes(status)).slice(0, 5)).toEqual([]);
      // A 503 is a problem (load shedding: each commit holds the event loop for its fsync), never a bare error.
      for (const { body } of outcomes.filter(({ status }) => status === 503).slice(0, 20))
        expect(JSON.parse(body)).toMatchObject({ type: '/problems/service-unavailable', status: 503 });
      expect((counts[200] ?? 0) + (counts[201] ?? 0)).toBeGreaterThan(0);
      expect(burstMs).toBeLessThan(30_000);
      // Nothing queued without bound while the burst lasted.
      expect(peak).toBeLessThan(baseline + 256 * MIB);

      // Still up and answering.
      expect(server.child.exitCode).toBeNull();
      const live = await fetch(`${server.baseUrl}/health/live`);
      expect(live.status).toBe(200);
      await live.arrayBuffer();

      // Memory comes back down (no forced GC from outside, and V8 and glibc keep some of what they
      // grew: the bound is generous, but a server that kept the burst's requests, bodies or sockets
      // would not meet it).
      const bound = baseline * 1.5 + 30 * MIB;
      let rss = rssOf(server);
      for (const until = performance.now() + 10_000; rss > bound && performance.now() < until; rss = rssOf(server))
        await pause(250);
      console.log(`RSS after the burst: ${Math.round(rss / MIB)} MiB (bound ${Math.round(bound / MIB)} MiB)`);
      expect(rss).toBeLessThanOrEqual(bound);
    },
  );
});
