import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { openCheckedStorage } from '../../src/process/startup.js';
import { call, startApp, type CallOptions, type TestApp } from '../helpers/app.js';
import { NO_RATE_LIMITS } from '../helpers/rate-limits.js';
import { keptLog, type LogLine } from '../helpers/log.js';
import { commitElsewhere, damageSqliteFile } from '../helpers/damage.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, buildUser, createItem, createUser } from '../helpers/records.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';

/**
 * A real SQLite file damaged under a running rowi (pages overwritten, as a failing disk or a stray
 * write does it): what callers, the probe, the stored data and the log see. SQLite only; the start's
 * check of a damaged file is in corruption.process.test.ts.
 */
let test: TestApp | undefined;
afterEach(async () => {
  await test?.close();
  test = undefined;
});

/** The app on a fresh file with users and an item, its log (warn and above) kept. */
async function startWithData(): Promise<{ test: TestApp; log: LogLine[]; itemId: number }> {
  const { log, logger } = keptLog();
  test = await startApp({}, logger);
  for (let index = 0; index < 30; index++) await createUser(test);
  const { item } = await createItem(test);
  return { test, log, itemId: item.id };
}

/** What the undamaged tables hold, read on a connection of the test's own. */
async function undamagedRows(file: string) {
  const connection = await openSqliteFile(file);
  try {
    return {
      items: connection.all('select * from items order by id'),
      stock: connection.all('select * from stock order by item_id'),
      orders: connection.all('select * from orders order by id'),
      keys: connection.all('select * from idempotency_keys order by key'),
      callers: connection.all('select * from callers order by id'),
    };
  } finally {
    connection.close();
  }
}

describe('a SQLite file damaged while rowi serves it', () => {
  it('GET /v1/users: 503 storage-corrupt when the users table is damaged; then /health/ready fails, every write is refused with nothing written, other reads go on, and the log says so once', async () => {
    const { test, log, itemId } = await startWithData();
    await damageSqliteFile(test.config.data, { tree: 'users' });
    await commitElsewhere(test.config.data);

    const list = await test.call({ url: '/v1/users' });
    expectProblem(list, 503, 'storage-corrupt');
    expect(list.headers['retry-after']).toBe('60');

    const ready = await test.call({ url: '/health/ready', key: null });
    const problem = expectProblem(ready, 503, 'service-unavailable');
    expect(problem.checks).toMatchObject({
      database: { status: 'fail', output: 'the database is damaged (the log says where, and what to do)' },
    });

    const before = await undamagedRows(test.config.data);
    const writes: CallOptions[] = [
      { method: 'POST', url: '/v1/items', body: buildItem() },
      { method: 'POST', url: '/v1/items', body: buildItem(), headers: { 'idempotency-key': 'damaged-1' } },
      { method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity: 9 } },
      { method: 'POST', url: '/v1/callers', body: { name: 'after-damage', role: 'reader' } },
      { method: 'POST', url: '/v1/users', body: buildUser() },
    ];
    for (const write of writes) expectProblem(await test.call(write), 503, 'storage-corrupt');
    expect((await test.call({ url: '/health/ready', key: null })).status).toBe(503);
    expect(await undamagedRows(test.config.data)).toEqual(before);

    const items = await test.call({ url: '/v1/items' });
    expect(items.status).toBe(200);
    expect(items.json.data.map((item: { id: number }) => item.id)).toEqual([itemId]);

    // The background work (webhooks poll every 500 ms, the audit trail flushes every second) meets the refusal too.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The storage's own line, once; the audit trail's writer names the fault in its line too (below).
    const damageLines = log.filter((line) => line.msg.startsWith('SQLite ') && line.msg.includes('is damaged'));
    expect(damageLines).toHaveLength(1);
    expect(damageLines[0]).toMatchObject({ level: 50 });
    expect(damageLines[0]!.msg).toContain(`SQLite ${test.config.data} is damaged (database disk image is malformed)`);
    expect(damageLines[0]!.msg).toContain(`sqlite3 ${test.config.data} .recover | sqlite3 `);
    // The audit trail says once that its events wait in memory, as it does for any failure to write.
    const others = log.filter((line) => line.level >= 40 && !line.msg.includes('is damaged')).map((line) => line.msg);
    expect(others.filter((msg) => !msg.startsWith('could not write the audit trail'))).toEqual([]);
    expect(others.length).toBeLessThanOrEqual(1);
  });

  it('POST /v1/users: 503 storage-corrupt when the write itself meets a damaged index, and writes after it are refused too', async () => {
    const { test, itemId } = await startWithData();
    await damageSqliteFile(test.config.data, { tree: 'users_email_key_unique' });
    await commitElsewhere(test.config.data);
    const before = await undamagedRows(test.config.data);

    expectProblem(await test.call({ method: 'POST', url: '/v1/users', body: buildUser() }), 503, 'storage-corrupt');
    expectProblem(
      await test.call({ method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity: 9 } }),
      503,
      'storage-corrupt',
    );
    expect((await test.call({ url: '/health/ready', key: null })).status).toBe(503);
    expect(await undamagedRows(test.config.data)).toEqual(before);
  });
});

describe('a SQLite file whose start check goes on while rowi serves', () => {
  it('GET /health/ready: 503 and writes 503 storage-corrupt once the check, not finished within ROWI_SQLITE_CHECK_WAIT, finds the damage', async () => {
    const { test: first, itemId } = await startWithData();
    const {
      adminKey: key,
      config: { data: file },
    } = first;
    await first.close();
    test = undefined;
    await damageSqliteFile(file, { tree: 'users_name_id' });

    const { log, logger } = keptLog();
    const config = loadConfig({ ROWI_DATA: file, ROWI_SQLITE_CHECK_WAIT: '0', ...NO_RATE_LIMITS });
    const storage = await openCheckedStorage(config, logger);
    const app = await buildApp({ config, storage, logger });
    try {
      await app.ready();
      const deadline = Date.now() + 10_000;
      let ready = await call(app, { url: '/health/ready' });
      while (ready.status === 200 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        ready = await call(app, { url: '/health/ready' });
      }
      expect(ready.status).toBe(503);
      expectProblem(
        await call(app, { method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity: 9 }, key }),
        503,
        'storage-corrupt',
      );
      const damage = log.filter((line) => line.msg.includes('is damaged'));
      expect(damage).toHaveLength(1);
      expect(damage[0]!.msg).toContain("is damaged (SQLite's quick_check found damage");
      expect(damage[0]!.msg).toContain('users_name_id: Tree');
    } finally {
      await app.close();
      await storage.close();
    }
  });
});
