import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/db/connect.js';
import { migrateStorage } from '../../src/db/migrate.js';
import { readBackupStatus, startBackupSchedule } from '../../src/db/backup-schedule.js';
import { listBackups } from '../../src/db/backup.js';
import { registry, watchBackups } from '../../src/observability/metrics.js';
import { keptLog } from '../helpers/log.js';
import { tempFolder } from '../helpers/temp.js';

/** Scheduled backups (ROWI_BACKUP_DIR): the newest ROWI_BACKUP_KEEP kept, the outcome in status.json and the metrics. */
describe('scheduled backups of the SQLite file', () => {
  it('takes checked backups, keeps the newest `keep`, and records the last success where every process reads it', async () => {
    const data = join(tempFolder('data'), 'rowi.db');
    const storage = await openSqlite({ data, sqliteSynchronous: 'full' });
    await migrateStorage(storage);
    await storage.close();
    const folder = join(tempFolder('backups'), 'nightly');
    const { log, logger } = keptLog('info');
    const schedule = startBackupSchedule({ data, folder, intervalMs: 3_600_000, keep: 2, log: logger });
    const taken = [];
    for (let run = 0; run < 3; run++) taken.push(await schedule.runOnce());
    await schedule.close();

    expect(taken.every((manifest) => manifest !== undefined)).toBe(true);
    const kept = await listBackups(folder);
    expect(kept.map((manifest) => manifest.file)).toEqual([taken[2]!.file, taken[1]!.file]);
    expect(readdirSync(folder).sort()).toEqual(
      [...kept.flatMap((manifest) => [manifest.file, `${manifest.file}.json`]), 'status.json'].sort(),
    );
    expect(existsSync(join(folder, taken[0]!.file))).toBe(false);
    expect(kept[0]).toMatchObject({
      schema: expect.stringMatching(/^\d{4}-/),
      rows: { kysely_migration: expect.any(Number) },
    });
    const status = await readBackupStatus(folder);
    expect(status).toMatchObject({ failures: 0, last_failure_at: null, last_error: null });
    expect(Date.parse(status!.last_success_at!)).toBeGreaterThan(Date.now() - 60_000);
    expect(log.filter((line) => line.msg.startsWith('backup of ')).length).toBe(3);
  });

  it('the first scheduled backup is due an interval after the newest backup in the folder, not after the start (a rowi restarted more often than its interval still takes them)', async () => {
    const data = join(tempFolder('data'), 'rowi.db');
    const storage = await openSqlite({ data, sqliteSynchronous: 'full' });
    await migrateStorage(storage);
    await storage.close();
    const folder = tempFolder('backups');
    const { logger } = keptLog('info');
    const first = startBackupSchedule({ data, folder, intervalMs: 3_600_000, keep: 5, log: logger });
    const taken = await first.runOnce();
    await first.close();
    // As if that backup had been taken an hour ago, less half a second: the next one is due now.
    const manifest = join(folder, `${taken!.file}.json`);
    const aged = { ...taken!, taken_at: new Date(Date.now() - 3_600_000 + 500).toISOString() };
    writeFileSync(manifest, JSON.stringify(aged));

    const restarted = startBackupSchedule({ data, folder, intervalMs: 3_600_000, keep: 5, log: logger });
    const deadline = Date.now() + 20_000;
    while ((await listBackups(folder)).length < 2 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    await restarted.close();

    const files = (await listBackups(folder)).map((backup) => backup.file);
    expect(files).toHaveLength(2);
    expect(files[1]).toBe(taken!.file);
  });

  it('a folder removed between two backups is made again, and the next backup into it is taken', async () => {
    const data = join(tempFolder('data'), 'rowi.db');
    const storage = await openSqlite({ data, sqliteSynchronous: 'full' });
    await migrateStorage(storage);
    await storage.close();
    const folder = join(tempFolder('backups'), 'removed', 'nightly');
    const { logger } = keptLog('info');
    const schedule = startBackupSchedule({ data, folder, intervalMs: 3_600_000, keep: 2, log: logger });
    expect(await schedule.runOnce()).toBeDefined();
    rmSync(dirname(folder), { recursive: true });
    const next = await schedule.runOnce();
    await schedule.close();

    expect((await listBackups(folder)).map((manifest) => manifest.file)).toEqual([next!.file]);
    expect(await readBackupStatus(folder)).toMatchObject({ failures: 0, last_error: null });
  });

  it('a backup that fails (the database is gone) is one error line, a count in status.json and in the metrics; never a throw', async () => {
    const folder = tempFolder('backups');
    const { log, logger } = keptLog('info');
    const schedule = startBackupSchedule({
      data: join(tempFolder('data'), 'missing.db'),
      folder,
      intervalMs: 3_600_000,
      keep: 2,
      log: logger,
    });
    expect(await schedule.runOnce()).toBeUndefined();
    expect(await schedule.runOnce()).toBeUndefined();
    await schedule.close();
    const status = await readBackupStatus(folder);
    expect(status).toMatchObject({
      failures: 2,
      last_success_at: null,
      last_error: expect.stringContaining('no database to back up'),
    });
    expect(log.filter((line) => line.level === 50).map((line) => line.msg)).toEqual([
      expect.stringContaining('the scheduled backup of'),
      expect.stringContaining('the scheduled backup of'),
    ]);
    expect(readdirSync(folder)).toEqual(['status.json']);

    watchBackups(async () => {
      const read = await readBackupStatus(folder);
      return { lastSuccess: undefined, failures: read?.failures ?? 0 };
    });
    const exposition = await registry.metrics();
    expect(exposition).toMatch(/^rowi_backup_failures_total 2$/m);
    expect(exposition).toMatch(/^rowi_backup_last_success_timestamp_seconds 0$/m);
  });
  it('a status.json that holds no JSON object (null, an array, a string) is read as none, and the next outcome rewrites it whole', async () => {
    const data = join(tempFolder('data'), 'rowi.db');
    const storage = await openSqlite({ data, sqliteSynchronous: 'full' });
    await migrateStorage(storage);
    await storage.close();
    const folder = tempFolder('backups');
    for (const text of ['null', '[7]', '"text"']) {
      writeFileSync(join(folder, 'status.json'), text);
      expect(await readBackupStatus(folder), text).toBeUndefined();
    }
    const { logger } = keptLog('info');
    const schedule = startBackupSchedule({ data, folder, intervalMs: 3_600_000, keep: 5, log: logger });
    expect(await schedule.runOnce()).toBeDefined();
    await schedule.close();
    expect(Object.keys(JSON.parse(readFileSync(join(folder, 'status.json'), 'utf8'))).sort()).toEqual([
      'failures',
      'last_error',
      'last_failure_at',
      'last_success_at',
    ]);
  });
});
