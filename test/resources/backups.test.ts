import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockBackupFolder } from '../../src/db/backup-lock.js';
import { checkBackup } from '../../src/db/backup.js';
import { MIGRATION_NAMES } from '../../src/db/migrate.js';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { openStorage } from '../../src/db/connect.js';
import { call, startApp, type TestApp } from '../helpers/app.js';
import { BACKEND } from '../helpers/database.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createUser } from '../helpers/records.js';
import { keptLog } from '../helpers/log.js';
import { tempFolder } from '../helpers/temp.js';
import { mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.js';

/** Backups over HTTP (docs/backups.md): POST /v1/backups, GET /v1/backups, GET /v1/backups/{name}. */
async function ended(test: TestApp, location: string) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const reply = await test.call({ url: location });
    if (!['queued', 'running'].includes(reply.json.status)) return reply;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${location} did not end`);
}

describe.skipIf(BACKEND !== 'sqlite')('backups over HTTP on SQLite', () => {
  let test: TestApp;
  let folder: string;
  beforeAll(async () => {
    folder = join(tempFolder('backups'), 'kept');
    // Load shedding off: on a loaded machine the backup threads and two apps in one process may delay the event loop past its limit.
    test = await startApp({ ROWI_BACKUP_DIR: folder, ROWI_BACKUP_KEEP: '3', ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  });
  afterAll(() => test.close());

  it('POST /v1/backups: 202 with Location of an operation that succeeds, naming a checked backup (size, SHA-256, schema version, rows) that GET /v1/backups lists', async () => {
    await createUser(test);
    await createUser(test);
    const started = await test.call({ method: 'POST', url: '/v1/backups' });
    expect(started.status).toBe(202);
    expect(started.headers.location).toBe(`/v1/operations/${started.json.id}`);
    expect(started.json).toMatchObject({ kind: 'backup', status: 'queued', summary: null, created_by: 1 });

    const done = await ended(test, started.headers.location as string);
    expect(done.json.status).toBe('succeeded');
    expect(done.json.summary.problem).toBeNull();
    const backup = done.json.summary.backup;
    const bytes = readFileSync(join(folder, backup.file));
    expect(backup).toMatchObject({
      file: expect.stringMatching(/^rowi-\d{8}T\d{6}\.\d{3}Z\.sqlite$/),
      bytes: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      schema: MIGRATION_NAMES.at(-1),
      rows: { users: 2 },
      url: `/v1/backups/${backup.file}`,
    });
    expect(done.json.started_at).not.toBeNull();
    // The backup is one `rowi restore` takes: sound, rowi's, its checksum as recorded.
    await expect(checkBackup(join(folder, backup.file), MIGRATION_NAMES)).resolves.toMatchObject({
      sha256: backup.sha256,
    });

    const list = await test.call({ url: '/v1/backups' });
    expect(list.status).toBe(200);
    expect(list.json).toEqual({ data: [backup], next_cursor: null });
    const one = await test.call({ url: backup.url });
    expect(one.status).toBe(200);
    expect(one.json).toEqual(backup);
    const metrics = await test.call({ url: '/metrics' });
    expect(Number(/^rowi_backup_last_success_timestamp_seconds (\S+)$/m.exec(metrics.text)?.[1])).toBeGreaterThan(
      Date.now() / 1000 - 60,
    );
  });

  it('POST /v1/backups: 409 backup-running naming the unfinished one while a backup is queued (waiting for the folder, as behind the schedule); it runs once the folder is free', async () => {
    const lock = await lockBackupFolder(folder);
    let first;
    try {
      first = await test.call({ method: 'POST', url: '/v1/backups' });
      expect(first.status).toBe(202);
      const second = await test.call({ method: 'POST', url: '/v1/backups' });
      expectProblem(second, 409, 'backup-running');
      expect(second.json.operation).toBe(first.headers.location);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await test.call({ url: first.headers.location as string })).json.status).toBe('queued');
    } finally {
      await lock.release();
    }
    expect((await ended(test, first.headers.location as string)).json.status).toBe('succeeded');
  });

  it('POST /v1/backups: two at once on two instances of one database file (as two workers): one is queued, the other gets 409 backup-running naming it', async () => {
    const other = await openStorage(test.config, pino({ level: 'silent' }));
    const otherApp = await buildApp({ config: test.config, storage: other, logger: pino({ level: 'silent' }) });
    const lock = await lockBackupFolder(folder);
    try {
      await otherApp.ready();
      const replies = await Promise.all([
        test.call({ method: 'POST', url: '/v1/backups' }),
        call(otherApp, { method: 'POST', url: '/v1/backups', key: test.adminKey }),
      ]);
      const accepted = replies.filter((reply) => reply.status === 202);
      const refused = replies.filter((reply) => reply.status === 409);
      expect([accepted.length, refused.length]).toEqual([1, 1]);
      expectProblem(refused[0]!, 409, 'backup-running');
      expect(refused[0]!.json.operation).toBe(accepted[0]!.headers.location);
      await lock.release();
      expect((await ended(test, accepted[0]!.headers.location as string)).json.status).toBe('succeeded');
    } finally {
      await lock.release();
      await otherApp.close();
      await other.close();
    }
  });

  it('DELETE /v1/operations/{id}: a queued backup is cancelled, and writes nothing', async () => {
    const lock = await lockBackupFolder(folder);
    const before = (await test.call({ url: '/v1/backups' })).json.data.length;
    try {
      const started = await test.call({ method: 'POST', url: '/v1/backups' });
      const cancelled = await test.call({ method: 'DELETE', url: started.headers.location as string });
      expect(cancelled.status).toBe(202);
      expect(cancelled.json).toMatchObject({ status: 'cancelled', summary: { backup: null, problem: null } });
    } finally {
      await lock.release();
    }
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await test.call({ url: '/v1/backups' })).json.data.length).toBe(before);
  });

  it('GET /v1/backups: pages newest first (Link rel="next", next_cursor), keeps ROWI_BACKUP_KEEP, and refuses a cursor it did not issue', async () => {
    for (let run = 0; run < 3; run++) {
      const started = await test.call({ method: 'POST', url: '/v1/backups' });
      expect((await ended(test, started.headers.location as string)).json.status).toBe('succeeded');
    }
    const all = (await test.call({ url: '/v1/backups' })).json.data as { file: string; taken_at: string }[];
    expect(all).toHaveLength(3);
    expect([...all].sort((a, b) => b.taken_at.localeCompare(a.taken_at))).toEqual(all);
    const first = await test.call({ url: '/v1/backups?limit=2' });
    expect(first.json.data).toEqual(all.slice(0, 2));
    expect(first.headers.link).toBe(`</v1/backups?limit=2&cursor=${first.json.next_cursor}>; rel="next"`);
    const second = await test.call({ url: `/v1/backups?limit=2&cursor=${first.json.next_cursor}` });
    expect(second.json).toEqual({ data: all.slice(2), next_cursor: null });
    expectProblem(await test.call({ url: '/v1/backups?cursor=nope' }), 400, 'invalid-query');
  });

  it('GET /v1/backups/{name}: 404 when there is no such backup; 403 for a caller without backups:read', async () => {
    expectProblem(await test.call({ url: '/v1/backups/rowi-none.sqlite' }), 404, 'not-found');
    expectProblem(await test.call({ url: '/v1/backups/status.json' }), 404, 'not-found');
    const reader = await createCallerWithKey(test, { role: 'reader' });
    expectProblem(await test.call({ url: '/v1/backups', key: reader.key }), 403, 'insufficient-scope');
    expectProblem(await test.call({ method: 'POST', url: '/v1/backups', key: reader.key }), 403, 'insufficient-scope');
  });

  it('POST /v1/backups: when the folder cannot be written, the operation fails with 500 internal-error saying why, the failure is counted, and the database and the server go on', async () => {
    rmSync(folder, { recursive: true, force: true });
    writeFileSync(folder, 'not a folder');
    try {
      const started = await test.call({ method: 'POST', url: '/v1/backups' });
      expect(started.status).toBe(202);
      const done = await ended(test, started.headers.location as string);
      expect(done.json).toMatchObject({
        status: 'failed',
        summary: {
          backup: null,
          detail: expect.stringMatching(/^The backup failed: .*a file is where a folder should be/),
          problem: { type: 'internal-error', status: 500 },
        },
      });
      const metrics = await test.call({ url: '/metrics' });
      expect(Number(/^rowi_backup_failures_total (\S+)$/m.exec(metrics.text)?.[1])).toBeGreaterThanOrEqual(1);
      expect((await createUser(test)).user.id).toBeGreaterThan(0);
      expect((await test.call({ url: '/health/ready' })).status).toBe(200);
    } finally {
      rmSync(folder, { force: true });
    }
  });

  it('GET /v1/operations/{id}: a backup whose process was killed (its lease ran out) ends failed with 503 service-unavailable, and another can start', async () => {
    const now = Date.now();
    const [killed] = await test.storage.db
      .insertInto('operations')
      .values({
        kind: 'backup',
        target: 'database',
        status: 'running',
        media_type: 'application/vnd.sqlite3',
        mode: 'atomic',
        on_conflict: 'error',
        dry_run: 0,
        created_by: 1,
        caller_name: 'admin',
        request_id: 'killed-backup',
        holder: 'a-process-killed-with-sigkill',
        lease_until: new Date(now - 1000).toISOString(),
        bytes_total: 0,
        summary: null,
        version: 2,
        created_at: new Date(now - 20_000).toISOString(),
        updated_at: new Date(now - 20_000).toISOString(),
        started_at: new Date(now - 20_000).toISOString(),
        finished_at: null,
      })
      .returning('id')
      .execute();
    const done = await ended(test, `/v1/operations/${killed!.id}`);
    expect(done.json).toMatchObject({
      kind: 'backup',
      status: 'failed',
      summary: {
        backup: null,
        detail: expect.stringContaining('The process taking the backup stopped'),
        problem: { type: 'service-unavailable', status: 503 },
      },
    });
    const next = await test.call({ method: 'POST', url: '/v1/backups' });
    expect(next.status).toBe(202);
    expect((await ended(test, next.headers.location as string)).json.status).toBe('succeeded');
  });
});

/** ROWI_BACKUP_DIR on a tmpfs too small for the copy: a full disk, for real (SQLite only: PostgreSQL has no backups here). */
const smallDisk = tempFolder('tmpfs');
const mounted = BACKEND === 'sqlite' && mountTmpfs(smallDisk, '256k', 'backup into a full disk test');

describe.skipIf(!mounted)('backups over HTTP into a full disk', () => {
  let test: TestApp;
  const { log, logger } = keptLog('info');
  beforeAll(async () => {
    test = await startApp({ ROWI_BACKUP_DIR: smallDisk, ROWI_MAX_EVENT_LOOP_DELAY: '0' }, logger);
    // About 600 KB of audit trail: the copy cannot fit in 256 KB.
    const rows = Array.from({ length: 3000 }, (_, index) => ({
      at: new Date().toISOString(),
      request_id: `ballast-${index}`.padEnd(32, '-'),
      caller_id: null,
      caller_name: null,
      credential: null,
      method: 'GET',
      path: `/v1/users/${index}`,
      resource: 'users',
      record_id: String(index),
      action: 'read',
      status: 200,
      duration_ms: 1.5,
      client_ip: '127.0.0.1',
    }));
    for (let start = 0; start < rows.length; start += 200)
      await test.storage.db
        .insertInto('audit_events')
        .values(rows.slice(start, start + 200))
        .execute();
  });
  afterAll(async () => {
    await test?.close();
    if (mounted) unmountTmpfs(smallDisk);
  });

  it('POST /v1/backups: when the disk is full, the operation fails with 507 insufficient-storage, the log says why, the failure is counted, nothing is left in the folder, and writes go on', async () => {
    const failuresBefore = Number(
      /^rowi_backup_failures_total (\S+)$/m.exec((await test.call({ url: '/metrics' })).text)?.[1] ?? 0,
    );
    const started = await test.call({ method: 'POST', url: '/v1/backups' });
    expect(started.status).toBe(202);
    const done = await ended(test, started.headers.location as string);
    expect(done.json).toMatchObject({
      status: 'failed',
      summary: {
        backup: null,
        detail: `The backup failed: the disk is full where the backup is written (${smallDisk}). No backup was written and the database is unchanged.`,
        problem: { type: 'insufficient-storage', status: 507 },
      },
    });
    expect(log.filter((line) => line.level === 50).map((line) => line.msg)).toEqual([
      expect.stringMatching(new RegExp(`^the backup /v1/operations/${done.json.id} of .* failed: the disk is full`)),
    ]);
    const metrics = (await test.call({ url: '/metrics' })).text;
    expect(Number(/^rowi_backup_failures_total (\S+)$/m.exec(metrics)?.[1])).toBe(failuresBefore + 1);
    expect(readdirSync(smallDisk)).toEqual(['status.json']);
    expect((await test.call({ url: '/v1/backups' })).json.data).toEqual([]);
    expect((await createUser(test)).user.id).toBeGreaterThan(0);
    expect((await test.call({ url: '/health/ready' })).status).toBe(200);
  });
});

describe('backups over HTTP where there is nothing to back up into', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(() => test.close());

  it(`POST and GET /v1/backups: 409 ${BACKEND === 'sqlite' ? 'backups-not-configured without ROWI_BACKUP_DIR' : 'backups-on-postgresql, naming its own tools'}`, async () => {
    const type = BACKEND === 'sqlite' ? 'backups-not-configured' : 'backups-on-postgresql';
    for (const reply of [
      await test.call({ method: 'POST', url: '/v1/backups' }),
      await test.call({ url: '/v1/backups' }),
      await test.call({ url: '/v1/backups/rowi-x.sqlite' }),
    ]) {
      expectProblem(reply, 409, type);
      expect(reply.json.detail).toMatch(BACKEND === 'sqlite' ? /ROWI_BACKUP_DIR is not set/ : /pg_dump/);
    }
    const operations = await test.call({ url: '/v1/operations?kind=backup' });
    expect(operations.json.data).toEqual([]);
  });
});
