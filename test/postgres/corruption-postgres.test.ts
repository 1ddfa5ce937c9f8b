import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { keptLog } from '../helpers/log.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, createUser } from '../helpers/records.js';

/**
 * PostgreSQL reporting damage (data_corrupted, XX001: a block it cannot read): what callers, the
 * probe and the log see. The shared server's files are not to be damaged, so the users table is
 * put behind a view whose every read raises that SQLSTATE, as PostgreSQL does reading a damaged
 * block: the error comes from the real server, through the real driver and pool.
 */
let test: TestApp | undefined;
afterEach(async () => {
  await test?.close();
  test = undefined;
});

describe('PostgreSQL reporting a damaged table', () => {
  it('GET /v1/users: 503 storage-corrupt when PostgreSQL answers data_corrupted (XX001); then /health/ready fails, writes elsewhere go on, and the log says so once', async () => {
    const { log, logger } = keptLog();
    test = await startApp({}, logger);
    await createUser(test);
    await sql`create function damaged_block() returns boolean language plpgsql as $$
      begin raise exception 'invalid page in block 0 of relation base/16384/16385' using errcode = 'data_corrupted'; end $$`.execute(
      test.storage.db,
    );
    await sql`alter table users rename to users_stored`.execute(test.storage.db);
    await sql`create view users as select * from users_stored where damaged_block()`.execute(test.storage.db);

    for (let attempt = 0; attempt < 3; attempt++) {
      const list = await test.call({ url: '/v1/users' });
      expectProblem(list, 503, 'storage-corrupt');
      expect(list.headers['retry-after']).toBe('60');
    }
    const ready = await test.call({ url: '/health/ready', key: null });
    expect(expectProblem(ready, 503, 'service-unavailable').checks).toMatchObject({
      database: { status: 'fail', output: 'the database is damaged (the log says where, and what to do)' },
    });
    // PostgreSQL keeps the damage to its block, behind its own write-ahead log: other tables take writes.
    expect((await test.call({ method: 'POST', url: '/v1/items', body: buildItem() })).status).toBe(201);

    const damage = log.filter((line) => line.msg.includes('is damaged'));
    expect(damage).toHaveLength(1);
    expect(damage[0]).toMatchObject({ level: 50 });
    expect(damage[0]!.msg).toContain('is damaged (invalid page in block 0 of relation base/16384/16385)');
    expect(damage[0]!.msg).toContain('REINDEX');
    expect(log.filter((line) => line.level >= 40 && line !== damage[0])).toEqual([]);
  });
});
