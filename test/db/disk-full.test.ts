import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { prepareDatabase } from '../../src/process/startup.js';
import { ensureFirstAdmin } from '../../src/resources/callers/api-keys.service.js';
import { call, type CallOptions } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, buildUser } from '../helpers/records.js';
import { NO_RATE_LIMITS } from '../helpers/rate-limits.js';
import { tempFolder } from '../helpers/temp.js';
import { mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.js';

/**
 * The SQLite file on a full disk, for real: a small tmpfs filled to the last byte. Writes answer
 * 507 insufficient-storage with Retry-After and leave nothing half-written; reads go on; the log
 * names the cause once however many writes are refused; and writes succeed again as soon as space
 * is freed, without a restart. Mounting needs root: where it is not allowed the test is skipped
 * with a message, except where ROWI_TEST_TMPFS=required (.ci/run sets it), where that fails.
 */
const folder = tempFolder('tmpfs');
const mounted = mountTmpfs(folder, '16m', 'disk-full test');

const FILLER = join(folder, 'filler');
const logLines: { level: number; msg: string }[] = [];
let app: FastifyInstance;
let storage: Storage;
let key: string;
const request = (options: CallOptions) => call(app, { ...options, key: options.key === undefined ? key : options.key });

/** Writes zeros until the file system says it is full. */
function fillDisk(): void {
  const fd = openSync(FILLER, 'w');
  const block = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

async function stored() {
  const db = storage.db;
  return {
    users: await db.selectFrom('users').selectAll().orderBy('id').execute(),
    items: await db.selectFrom('items').selectAll().orderBy('id').execute(),
    stock: await db.selectFrom('stock').selectAll().orderBy('item_id').execute(),
    movements: await db.selectFrom('stock_movements').selectAll().orderBy('id').execute(),
    orders: await db.selectFrom('orders').selectAll().orderBy('id').execute(),
    lines: await db.selectFrom('order_lines').selectAll().orderBy('order_id').execute(),
    keys: await db.selectFrom('idempotency_keys').selectAll().orderBy('key').execute(),
  };
}

describe.skipIf(!mounted)('the SQLite file on a full disk', () => {
  let userId: number;
  let itemId: number;

  beforeAll(async () => {
    const config = loadConfig({
      ROWI_DATA: join(folder, 'rowi.db'),
      ROWI_AUDIT_FLUSH_INTERVAL: '50',
      ...NO_RATE_LIMITS,
    });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean))
          logLines.push(JSON.parse(line) as { level: number; msg: string });
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink);
    storage = await openStorage(config, logger);
    await prepareDatabase(storage);
    key = (await ensureFirstAdmin(storage.db))!.key;
    app = await buildApp({ config, storage, logger });
    await app.ready();
    userId = (await request({ method: 'POST', url: '/v1/users', body: buildUser() })).json.id;
    itemId = (await request({ method: 'POST', url: '/v1/items', body: buildItem() })).json.id;
    expect((await request({ method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity: 50 } })).status).toBe(
      200,
    );
  });

  afterAll(async () => {
    rmSync(FILLER, { force: true });
    await app?.close();
    await storage?.close();
    unmountTmpfs(folder);
  });

  it('writes: 507 insufficient-storage with Retry-After and nothing stored changed; reads: 200; the cause logged once; after space is freed: 201 again', async () => {
    fillDisk();
    const before = await stored();
    const linesBefore = logLines.length;

    const writes: CallOptions[] = [
      { method: 'POST', url: '/v1/users', body: buildUser() },
      { method: 'POST', url: '/v1/users', body: buildUser(), headers: { 'idempotency-key': 'full-disk-1' } },
      {
        method: 'POST',
        url: '/v1/orders',
        body: { name: 'full', user_id: userId, lines: [{ item_id: itemId, quantity: 2 }] },
      },
      { method: 'PUT', url: `/v1/items/${itemId}/stock`, body: { quantity: 40 } },
      {
        method: 'PATCH',
        url: `/v1/users/${userId}`,
        headers: { 'content-type': 'application/merge-patch+json' },
        body: '{"name":"Full"}',
      },
      { method: 'DELETE', url: `/v1/users/${userId}` },
    ];
    for (let round = 0; round < 3; round++) {
      for (const write of writes) {
        const reply = await request(write);
        const problem = expectProblem(reply, 507, 'insufficient-storage');
        expect(reply.headers['retry-after']).toBe('30');
        expect(problem.detail).toMatch(/no space left/);
      }
    }
    expect(await stored()).toEqual(before);

    for (const url of [
      `/v1/users/${userId}`,
      '/v1/users',
      '/v1/orders',
      `/v1/items/${itemId}/stock`,
      '/health/ready',
    ]) {
      expect((await request({ url })).status, url).toBe(200);
    }

    const written = logLines.slice(linesBefore);
    const errors = written.filter((line) => line.level >= 50);
    expect(
      errors.filter((line) => /^the disk holding .* is full/.test(line.msg)),
      JSON.stringify(errors),
    ).toHaveLength(1);
    expect(errors.filter((line) => /request failed|unexpected error|cannot rollback/.test(line.msg))).toEqual([]);
    // At most one line more: the audit trail's writer saying once that its writes fail.
    expect(errors.length).toBeLessThanOrEqual(2);

    rmSync(FILLER);
    const created = await request({
      method: 'POST',
      url: '/v1/users',
      body: buildUser(),
      headers: { 'idempotency-key': 'full-disk-1' },
    });
    expect(created.status).toBe(201);
    expect(created.headers['idempotent-replayed']).toBeUndefined();
    expect(
      (
        await request({
          method: 'POST',
          url: '/v1/orders',
          body: { name: 'after', user_id: userId, lines: [{ item_id: itemId, quantity: 2 }] },
        })
      ).status,
    ).toBe(201);
    expect(logLines.slice(linesBefore).filter((line) => /succeed again/.test(line.msg))).toHaveLength(1);
  });
});
