import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Importer } from '../helpers/imports.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * An orders import spends the caller's orders-create budget (docs/bulk.md "Importing orders"), one
 * unit an order, as POST /v1/orders and a batch do: a file larger than what is left, or than the
 * quota itself, is not refused but paced, chunk by chunk, while the caller's own POSTs feel the
 * spend. On the run's database; the import runs on the event loop here (from the sources), on the
 * import thread and across workers with Redis in orders.import-budget.process.test.ts.
 */
let test: TestApp | undefined;
afterEach(async () => {
  await test?.close();
  test = undefined;
});

const NDJSON = 'application/x-ndjson';

async function start(quotaPerMinute: number) {
  const folder = tempFolder('orders-budget');
  test = await startApp({
    ROWI_IMPORT_DIRECTORY: join(folder, 'spool'),
    ROWI_RATE_LIMIT_ORDERS_CREATE: String(quotaPerMinute),
  });
  const importer = new Importer(test, await test.app.listen({ host: '127.0.0.1', port: 0 }), folder);
  const { user } = await createUser(test);
  const { item } = await createItem(test);
  await setStock(test, item.id, 100_000);
  const order = (name: string) => ({ name, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] });
  const file = (prefix: string, count: number) =>
    `${Array.from({ length: count }, (_, index) => JSON.stringify(order(`${prefix}-${index}`))).join('\n')}\n`;
  return { test, importer, order, file };
}

const ordersNamed = async (app: TestApp, prefix: string) =>
  (await app.storage.db.selectFrom('orders').select('id').where('name', 'like', `${prefix}-%`).execute()).length;

describe('an orders import and the orders-create budget', () => {
  it("POST /v1/orders/import: each order spends a unit of the caller's orders-create budget, so the caller's next POST /v1/orders is 429 and another caller's is not, when the import spent it all", async () => {
    const { test, importer, order, file } = await start(20);
    const other = await createCallerWithKey(test, { role: 'editor' });
    const posted = await importer.upload('orders', file('SPENT', 20), { type: NDJSON, query: '?mode=partial' });
    expect(posted.status).toBe(202);
    const done = await importer.finished(String(posted.headers.location));
    expect(done.json).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 20 } });

    const refused = await test.call({ method: 'POST', url: '/v1/orders', body: order('AFTER-SPENT') });
    expect(expectProblem(refused, 429, 'rate-limited').policy).toBe('orders-create');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await test.call({ method: 'POST', url: '/v1/orders', body: order('OTHER'), key: other.key })).status).toBe(
      201,
    );
  });

  it("POST /v1/orders/import: a file of more orders than the budget holds is paced, not refused: it places every order once, no faster than the budget refills, and the caller's POST /v1/orders meanwhile finds the budget spent, when the import needs more than the quota", async () => {
    // 600 a minute: 10 a second; 630 orders take at least 3 s more than the budget holds at once.
    const { test, importer, order, file } = await start(600);
    const started = Date.now();
    const posted = await importer.upload('orders', file('PACED', 630), { type: NDJSON, query: '?mode=partial' });
    expect(posted.status).toBe(202);
    const location = String(posted.headers.location);
    let seen = (await test.call({ url: location })).json;
    for (let attempt = 0; attempt < 400 && seen.progress.rows_succeeded < 600; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      seen = (await test.call({ url: location })).json;
    }
    // The import waits for what it lacks a step (60) at a time: a POST may take a unit left over, never more.
    const meanwhile = await test.call({ method: 'POST', url: '/v1/orders', body: order('DURING-PACED') });
    if (meanwhile.status === 429) expect(expectProblem(meanwhile, 429, 'rate-limited').policy).toBe('orders-create');
    else {
      expect(meanwhile.status).toBe(201);
      const remaining = /"orders-create";r=(\d+)/.exec(String(meanwhile.headers.ratelimit))?.[1];
      expect(Number(remaining)).toBeLessThan(60);
    }

    const done = await importer.finished(location);
    expect(done.json).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 630, rows_failed: 0 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
    expect(await ordersNamed(test, 'PACED')).toBe(630);
  });

  it('POST /v1/operations/{id}/cancel: an import waiting for its budget ends cancelled within seconds, with the orders of the chunk it waited for not placed', async () => {
    // 60 a minute: one a second; the first chunk of 100 orders waits for 40 more.
    const { test, importer, file } = await start(60);
    const posted = await importer.upload('orders', file('WAITING', 150), { type: NDJSON, query: '?mode=partial' });
    const location = String(posted.headers.location);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await test.call({ url: location })).json.status).toBe('running');
    const asked = Date.now();
    expect((await test.call({ method: 'POST', url: `${location}/cancel` })).status).toBe(202);
    const done = await importer.finished(location);
    expect(Date.now() - asked).toBeLessThan(5000);
    expect(done.json).toMatchObject({ status: 'cancelled', progress: { rows_succeeded: 0, committed_through: 0 } });
    expect(await ordersNamed(test, 'WAITING')).toBe(0);
  });

  it('POST /v1/orders/import: an atomic import spends once for its orders (its check, not its write again), when the file holds as many orders as the quota', async () => {
    const { test, importer, file } = await start(30);
    const started = Date.now();
    const posted = await importer.upload('orders', file('ONCE', 30), { type: NDJSON });
    const done = await importer.finished(String(posted.headers.location));
    expect(done.json).toMatchObject({ status: 'succeeded', progress: { rows_succeeded: 30 } });
    // Spent twice, the write would wait a minute for the budget to refill.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(await ordersNamed(test, 'ONCE')).toBe(30);
  });

  it('POST /v1/orders/import: an import waiting for its budget stops within seconds when rowi stops, failed with the orders of the chunk it waited for not placed', async () => {
    const { test, importer, file } = await start(60);
    const posted = await importer.upload('orders', file('STOPPING', 150), { type: NDJSON, query: '?mode=partial' });
    const id = Number(String(posted.headers.location).split('/').pop());
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const asked = Date.now();
    await test.app.close();
    expect(Date.now() - asked).toBeLessThan(5000);
    const stored = await test.storage.db
      .selectFrom('operations')
      .select(['status', 'rows_succeeded', 'summary'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(stored.status).toBe('failed');
    expect(Number(stored.rows_succeeded)).toBe(0);
    expect(JSON.parse(stored.summary!).detail).toMatch(/rowi stopped/);
    expect(await ordersNamed(test, 'STOPPING')).toBe(0);
  });
});
