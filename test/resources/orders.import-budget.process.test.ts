import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { callServer, sendAlone, serverPool, workersThatAnswered, type RunningServer } from '../helpers/process.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * An orders import spends its caller's orders-create budget as it runs (docs/bulk.md "Importing
 * orders"), where the budget is what requests spend: the import on the import thread of one worker
 * of `rowi serve --workers 2`, the budget's counters in Redis, shared with both workers' requests.
 * On SQLite, and on PostgreSQL in the process-postgres project (the thread asked for there).
 */
const REDIS_URL = process.env.ROWI_TEST_REDIS_URL || undefined;
const { serve, killAll } = serverPool();
afterEach(killAll);

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Operation {
  status: string;
  progress: { rows_succeeded: number };
}

async function untilCountedInRedis(server: RunningServer): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const limits = await sendAlone(server, 'GET', '/v1/limits', {});
    if ((JSON.parse(limits.text) as { counted: string }).counted === 'redis') return;
    await pause(100);
  }
  throw new Error('the workers did not count in Redis');
}

describe('an orders import on the import thread, its budget shared in Redis', () => {
  it.skipIf(REDIS_URL === undefined)(
    "POST /v1/orders/import: the import on the thread of one worker spends the caller's orders-create budget in Redis, so POST /v1/orders on both workers finds it spent, and the import places every order no faster than the budget refills, when it needs more than the quota",
    { timeout: 120_000 },
    async () => {
      const server = await serve({
        args: ['--workers', '2'],
        timeoutMs: 60_000,
        env: {
          ROWI_REDIS_URL: REDIS_URL!,
          ROWI_RATE_LIMIT_ORDERS_CREATE: '600',
          ROWI_IMPORT_THREAD: 'thread',
          ROWI_IMPORT_DIRECTORY: join(tempFolder('orders-budget'), 'spool'),
        },
      });
      for (let worker = 0; worker < 2; worker++) await untilCountedInRedis(server);
      const user = (await callServer(server, 'POST', '/v1/users', { name: 'Paced', email: 'paced@example.com' })).json;
      const item = (await callServer(server, 'POST', '/v1/items', { name: 'Paced', sku: 'PACED-1', price: '1.00' }))
        .json;
      expect((await callServer(server, 'PUT', `/v1/items/${item.id}/stock`, { quantity: 100_000 })).status).toBe(200);
      const order = (name: string) =>
        JSON.stringify({ name, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] });
      const file = join(tempFolder('orders-budget-file'), 'orders.ndjson');
      // 600 a minute, 10 a second: 700 orders take at least 10 s more than the budget holds at once.
      writeFileSync(file, `${Array.from({ length: 700 }, (_, index) => order(`T-${index}`)).join('\n')}\n`);

      const started = Date.now();
      const headers = { 'x-api-key': server.adminKey };
      const posted = await fetch(`${server.baseUrl}/v1/orders/import?mode=partial`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/x-ndjson' },
        body: readFileSync(file),
      });
      expect(posted.status).toBe(202);
      const location = posted.headers.get('location')!;
      const read = async () => (await callServer(server, 'GET', location)).json as Operation;
      let seen = await read();
      for (let attempt = 0; attempt < 600 && seen.progress.rows_succeeded < 600; attempt++) {
        await pause(50);
        seen = await read();
      }
      expect(seen.status).toBe('running');

      // Each on a connection of its own: the primary deals them to both workers.
      for (let index = 0; index < 4; index++) {
        const answer = await sendAlone(
          server,
          'POST',
          '/v1/orders',
          { ...headers, 'content-type': 'application/json' },
          order(`DURING-${index}`),
        );
        if (answer.status === 201) {
          const remaining = /"orders-create";r=(\d+)/.exec(String(answer.headers.ratelimit))?.[1];
          expect(Number(remaining), String(answer.headers.ratelimit)).toBeLessThan(60);
        } else expect(answer.status).toBe(429);
      }
      const answered = new Set([
        ...workersThatAnswered(server, 201, 'POST /v1/orders'),
        ...workersThatAnswered(server, 429, 'POST /v1/orders'),
      ]);
      expect(answered).toEqual(new Set([1, 2]));

      for (let attempt = 0; attempt < 600 && ['queued', 'running'].includes(seen.status); attempt++) {
        await pause(100);
        seen = await read();
      }
      expect(seen).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 700 } });
      expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
    },
  );
});
