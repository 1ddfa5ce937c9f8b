import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { createTestDatabase, PG_URL, type TestDatabase } from '../helpers/database.js';
import { keptLog, type LogLine } from '../helpers/log.js';
import { sample } from '../helpers/metrics.js';
import { buildUser } from '../helpers/records.js';
import { startTcpProxy, viaProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * PostgreSQL unreachable for a few seconds under load, seen in the log: the outage is logged as
 * what happened (the database unreachable, since when, the error's code; reachable again, and how
 * many requests were answered 503 meanwhile), not once per request or per turn of a background
 * loop, and no line carries a stack above debug level. "Unreachable" is a TCP proxy between rowi
 * and PostgreSQL that cuts every connection and refuses new ones.
 */
let test: TestApp | undefined;
let proxy: TcpProxy | undefined;
let database: TestDatabase | undefined;

afterEach(async () => {
  await proxy?.start();
  await test?.close();
  await proxy?.close();
  await database?.drop();
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('the log of a PostgreSQL outage', () => {
  it('PostgreSQL cut for 3 s under writes and reads: one line when it becomes unreachable, one when it is back with the count of 503s, at most one a background task, no stack above debug', async () => {
    database = await createTestDatabase('postgres');
    const target = new URL(PG_URL!);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const { log, logger } = keptLog('info');
    test = await startApp(
      {
        ROWI_DATABASE_URL: viaProxy(database.env.ROWI_DATABASE_URL!, proxy),
        ROWI_DATABASE_TIMEOUT: '1000',
        ROWI_DATABASE_POOL_SIZE: '4',
        ROWI_AUDIT_FLUSH_INTERVAL: '100',
        ROWI_LOG_LEVEL: 'info',
      },
      logger,
    );
    const app = test;

    // Bounded load: two writers and two readers, at most 2,000 requests, at most 20 s.
    const statuses: number[] = [];
    let done = false;
    const started = performance.now();
    const loop = async (request: () => Promise<{ status: number }>) => {
      while (!done && statuses.length < 2000 && performance.now() - started < 20_000) {
        const { status } = await request();
        statuses.push(status);
        await sleep(status === 503 ? 20 : 5);
      }
    };
    const write = () => app.call({ method: 'POST', url: '/v1/users', body: buildUser() });
    const read = () => app.call({ url: '/v1/users?limit=5' });
    const loops = [loop(write), loop(write), loop(read), loop(read)];
    try {
      await sleep(500);
      const before = log.length;
      const metricsBefore = (await app.call({ url: '/metrics' })).text;
      await proxy.stop();
      await sleep(3000);
      await proxy.start();
      const back = statuses.length;
      const deadline = performance.now() + 10_000;
      while (!statuses.slice(back).includes(201) && performance.now() < deadline) await sleep(50);
      // The background loops meet the database again too.
      await sleep(2500);
      done = true;
      await Promise.all(loops);

      const refused = statuses.filter((status) => status === 503).length;
      expect(refused).toBeGreaterThan(10);
      expect(statuses.filter((status) => status >= 500 && status !== 503)).toEqual([]);

      const during = log.slice(before);
      const loud = during.filter((line) => line.level >= 40);
      const show = () => during.map((line) => `${line.level} ${line.msg}`).join('\n');
      // No driver stack above debug level.
      expect(
        loud.filter((line: LogLine) => line.err !== undefined),
        show(),
      ).toEqual([]);
      // The state change, twice.
      const down = during.filter((line) => line.msg.startsWith('the database cannot be reached since '));
      expect(down, show()).toHaveLength(1);
      expect(down[0]!.level).toBe(50);
      // The error's code; pg names a connection cut under a query only in words.
      expect([null, 'ECONNRESET', 'ECONNREFUSED', 'EPIPE']).toContain(down[0]!.code);
      expect(down[0]!.msg).toContain(String(down[0]!.since));
      expect(Date.parse(String(down[0]!.since))).toBeGreaterThan(0);
      const up = during.filter((line) => line.msg.startsWith('the database answers again'));
      expect(up, show()).toHaveLength(1);
      const [, counted] =
        /^the database answers again after [\d.]+ s; (\d+) requests were answered 503 meanwhile$/.exec(up[0]!.msg)!;
      expect(up[0]!.level).toBe(30);
      expect(Number(counted)).toBeGreaterThan(10);
      expect(Number(counted)).toBeLessThanOrEqual(refused);
      // At most one line a background task; the rest is counted, not logged.
      const tasks = loud.flatMap((line) => (typeof line.task === 'string' ? [line.task] : []));
      expect(tasks.length, show()).toBe(new Set(tasks).size);
      expect(loud.length, show()).toBeLessThanOrEqual(16);
      expect(
        loud.filter((line) => line.msg.startsWith('request failed')),
        show(),
      ).toEqual([]);
      // The metrics count what the log does not repeat.
      const metrics = (await app.call({ url: '/metrics' })).text;
      const requestErrors = (text: string) => sample(text, 'rowi_db_unreachable_errors_total', { source: 'request' });
      expect(requestErrors(metrics) - requestErrors(metricsBefore)).toBeGreaterThanOrEqual(Number(counted));
      expect(sample(metrics, 'rowi_db_unreachable')).toBe(0);
    } finally {
      done = true;
      await Promise.all(loops);
    }
  });
});
