import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadCache, type CommitWatch } from '../../src/db/read-cache.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { sample } from '../helpers/metrics.js';
import { createCallerThroughApi, createUser } from '../helpers/records.js';
import { openSqliteFile, type SqliteFile } from '../helpers/sqlite-file.js';

/**
 * The records read by id that a process keeps (src/db/read-cache.ts, SQLite): what a caller sees
 * must be what a read of the file gives, whoever wrote last. The other process is played by a
 * connection of the test's own to the same file (as another worker, instance or program writes).
 */
describe('read cache: records read by id (SQLite)', () => {
  let test: TestApp;
  let file: SqliteFile;

  beforeAll(async () => {
    test = await startApp({ ROWI_READ_CACHE: '8' });
    file = await openSqliteFile(test.config.data);
  });
  afterAll(async () => {
    file.close();
    await test.close();
  });

  const read = (id: number, headers: Record<string, string> = {}, key?: string) =>
    test.call({ url: `/v1/users/${id}`, headers, ...(key === undefined ? {} : { key }) });

  it('a record changed by another connection to the file is read changed at once, with its new ETag', async () => {
    const { user } = await createUser(test);
    for (let round = 1; round <= 20; round += 1) {
      const before = await read(user.id);
      expect(before.status).toBe(200);
      // Read twice: the second may come from memory.
      expect((await read(user.id)).json).toEqual(before.json);
      file.exec(`update users set name = 'Changed ${round}', version = version + 1 where id = ${user.id}`);
      const after = await read(user.id);
      expect(after.json.name).toBe(`Changed ${round}`);
      expect(after.headers.etag).not.toBe(before.headers.etag);
      // The copy the client held is no longer current: 200 with the new one, not 304.
      const conditional = await read(user.id, { 'if-none-match': String(before.headers.etag) });
      expect(conditional.status).toBe(200);
      expect(conditional.json.name).toBe(`Changed ${round}`);
    }
  });

  it('a record deleted by another connection is not found at once', async () => {
    const { user } = await createUser(test);
    expect((await read(user.id)).status).toBe(200);
    expect((await read(user.id)).status).toBe(200);
    file.exec(`delete from users where id = ${user.id}`);
    expect((await read(user.id)).status).toBe(404);
  });

  it('a caller reads what it has just written through the API (PATCH, PUT, DELETE), never the copy read before', async () => {
    const { user } = await createUser(test);
    for (let round = 1; round <= 10; round += 1) {
      const before = await read(user.id);
      await read(user.id);
      const patched = await test.call({
        method: 'PATCH',
        url: `/v1/users/${user.id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': String(before.headers.etag) },
        body: { name: `Patched ${round}` },
      });
      expect(patched.status).toBe(200);
      const after = await read(user.id);
      expect(after.json).toEqual(patched.json);
      expect(after.headers.etag).toBe(patched.headers.etag);
    }
    const current = await read(user.id);
    const deleted = await test.call({
      method: 'DELETE',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': String(current.headers.etag) },
    });
    expect(deleted.status).toBe(204);
    expect((await read(user.id)).status).toBe(404);
  });

  it('a record kept for one caller is shown only to callers that may see it (record access)', async () => {
    const { user } = await createUser(test);
    const shop = await createCallerThroughApi(test, 'own-users-shop', {
      role: 'editor',
      record_access: { users: 'own' },
    });
    // The admin's read keeps it; the shop, which sees only users it created, is answered 404 all the same.
    expect((await read(user.id)).status).toBe(200);
    expect((await read(user.id)).status).toBe(200);
    const refused = await read(user.id, {}, shop.key);
    expect(refused.status).toBe(404);
    // And the shop's own user is shown to it, from the file or from memory alike.
    const own = await test.call({
      method: 'POST',
      url: '/v1/users',
      key: shop.key,
      body: { name: 'Own', email: 'own-cache@example.com' },
    });
    expect(own.status).toBe(201);
    for (let round = 0; round < 3; round += 1) expect((await read(own.json.id, {}, shop.key)).json).toEqual(own.json);
  });

  it('/metrics counts the reads answered from memory and those read from the file, and the bytes kept', async () => {
    const { user } = await createUser(test);
    const metricsBefore = await test.call({ url: '/metrics' });
    const hitsBefore = sample(metricsBefore.text, 'rowi_read_cache_lookups_total', { result: 'hit' });
    for (let round = 0; round < 5; round += 1) expect((await read(user.id)).status).toBe(200);
    const metrics = await test.call({ url: '/metrics' });
    expect(sample(metrics.text, 'rowi_read_cache_lookups_total', { result: 'hit' })).toBeGreaterThanOrEqual(
      hitsBefore + 3,
    );
    expect(sample(metrics.text, 'rowi_read_cache_lookups_total', { result: 'miss' })).toBeGreaterThanOrEqual(1);
    expect(sample(metrics.text, 'rowi_read_cache_bytes')).toBeGreaterThan(0);
  });
});

describe('read cache: ROWI_READ_CACHE=0', () => {
  it('keeps nothing: every read is read from the file', async () => {
    const test = await startApp({ ROWI_READ_CACHE: '0' });
    try {
      const { user } = await createUser(test);
      for (let round = 0; round < 3; round += 1)
        expect((await test.call({ url: `/v1/users/${user.id}` })).status).toBe(200);
      expect(test.storage.db.readCache).toBeUndefined();
    } finally {
      await test.close();
    }
  });
});

describe('ReadCache', () => {
  /** A watch whose commits the test makes. */
  function watch(): CommitWatch & { commit(): void } {
    let committed = false;
    return {
      commit: () => void (committed = true),
      changed: () => {
        const was = committed;
        committed = false;
        return was;
      },
      close: () => {},
    };
  }
  const row = (id: number, name = 'x'.repeat(20)) => ({ id, name, created_by: 1, version: 1 });

  it('forgets every record once anything was committed, and keeps nothing read before that commit', () => {
    const commits = watch();
    const cache = new ReadCache(1024 * 1024, commits);
    cache.keep('users', 1, row(1), cache.generation());
    expect(cache.get('users', 1)).toEqual(row(1));
    const generation = cache.generation();
    commits.commit();
    expect(cache.get('users', 1)).toBeUndefined();
    // Read before the commit, kept after it: refused.
    cache.keep('users', 2, row(2), generation);
    expect(cache.get('users', 2)).toBeUndefined();
  });

  it('stays within its bytes, the oldest records going first, and freezes what it keeps', () => {
    const cache = new ReadCache(4096, watch());
    for (let id = 1; id <= 200; id += 1) cache.keep('users', id, row(id), cache.generation());
    const { records, bytes } = cache.stats();
    expect(bytes).toBeLessThanOrEqual(4096);
    expect(records).toBeGreaterThan(10);
    expect(records).toBeLessThan(200);
    expect(cache.get('users', 1)).toBeUndefined();
    const newest = cache.get<ReturnType<typeof row>>('users', 200)!;
    expect(newest).toEqual(row(200));
    expect(Object.isFrozen(newest)).toBe(true);
  });

  it('keeps records of different tables apart', () => {
    const cache = new ReadCache(1024 * 1024, watch());
    cache.keep('users', 1, row(1, 'user'), cache.generation());
    cache.keep('items', 1, row(1, 'item'), cache.generation());
    expect(cache.get<ReturnType<typeof row>>('users', 1)!.name).toBe('user');
    expect(cache.get<ReturnType<typeof row>>('items', 1)!.name).toBe('item');
  });
});
