import { existsSync, readdirSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { Migrator } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/db/connect.js';
import { MIGRATION_NAMES, MIGRATIONS } from '../../src/db/migrate.js';
import { CLI, callServer, runCli, serverPool, tempDataFile } from '../helpers/process.js';
import { buildItem, buildUser } from '../helpers/records.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';
import { damageSqliteFile } from '../helpers/damage.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * `rowi backup` beside a serving rowi, and `rowi restore`: a backup taken under an orders load
 * restores to a database whose ledger balances and whose every order has its event; a backup
 * killed with SIGKILL leaves nothing under the final name; a restore refuses what it must.
 */
const servers = serverPool();
afterEach(servers.killAll);

/**
 * A database file, read directly (a copy of it: opening a file the way rowi does sets its journal
 * mode, which would change a backup's bytes): every item's ledger sums equal its stock, every
 * order has its order.created event.
 */
async function expectConsistent(file: string): Promise<{ orders: number }> {
  const scratch = join(tempFolder('inspect'), 'copy.sqlite');
  copyFileSync(file, scratch);
  const db = await openSqliteFile(scratch);
  try {
    const unbalanced = db.all(
      `select s.item_id, s.quantity, s.reserved, coalesce(sum(m.quantity_change), 0) as q, coalesce(sum(m.reserved_change), 0) as r
         from stock s left join stock_movements m on m.item_id = s.item_id
        group by s.item_id having s.quantity <> q or s.reserved <> r`,
    );
    expect(unbalanced).toEqual([]);
    const withoutEvent = db.all(
      `select o.id from orders o where not exists
         (select 1 from events e where e.type = 'order.created' and e.path = '/v1/orders/' || o.id)`,
    );
    expect(withoutEvent).toEqual([]);
    const integrity = db.all<{ integrity_check: string }>('pragma integrity_check');
    expect(integrity).toEqual([{ integrity_check: 'ok' }]);
    return { orders: db.get<{ n: number }>('select count(*) as n from orders')!.n };
  } finally {
    db.close();
  }
}

describe('rowi backup and rowi restore on the SQLite file', () => {
  it('rowi backup FILE while orders are placed: a checked copy with its SHA-256 beside it, which rowi restore puts in place whole (ledger balanced, every order with its event)', async () => {
    const server = await servers.serve({ dataFile: tempDataFile(), timeoutMs: 60_000 });
    const user = (await callServer(server, 'POST', '/v1/users', buildUser())).json;
    const items: number[] = [];
    for (let index = 0; index < 3; index++) {
      const item = (await callServer(server, 'POST', '/v1/items', buildItem())).json;
      expect((await callServer(server, 'PUT', `/v1/items/${item.id}/stock`, { quantity: 10_000 })).status).toBe(200);
      items.push(item.id);
    }
    // Orders go on, bounded in count and time, while the backup is taken.
    let placing = true;
    let placed = 0;
    const deadline = Date.now() + 20_000;
    const load = (async () => {
      while (placing && placed < 2000 && Date.now() < deadline) {
        const lines = [{ item_id: items[placed % items.length], quantity: 1 }];
        const answer = await callServer(server, 'POST', '/v1/orders', {
          name: `SO-${placed}`,
          user_id: user.id,
          lines,
        });
        expect(answer.status).toBe(201);
        placed++;
      }
    })();
    while (placed < 20 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const folder = tempFolder('backups');
    const file = join(folder, 'during-orders.sqlite');
    const backup = await runCli(['backup', file], { ROWI_DATA: server.dataFile }, 60_000);
    placing = false;
    await load;
    expect(backup.stderr).toBe('');
    expect(backup.code).toBe(0);
    const manifest = JSON.parse(backup.stdout);
    expect(manifest).toMatchObject({ file: 'during-orders.sqlite', schema: expect.stringMatching(/^\d{4}-/) });
    expect(manifest.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.parse(readFileSync(`${file}.json`, 'utf8'))).toEqual(manifest);
    expect(readdirSync(folder).sort()).toEqual(['during-orders.sqlite', 'during-orders.sqlite.json']);
    const { orders } = await expectConsistent(file);
    expect(orders).toBe(manifest.rows.orders);
    expect(orders).toBeGreaterThanOrEqual(20);

    // A second backup to the same name is refused; the first is untouched.
    const again = await runCli(['backup', file], { ROWI_DATA: server.dataFile });
    expect(again).toMatchObject({ code: 1, stdout: '' });
    expect(again.stderr).toContain('exists already');

    // Restoring is refused while the server has the database open, and changes nothing.
    const busy = await runCli(['restore', file], { ROWI_DATA: server.dataFile });
    expect(busy.code).toBe(1);
    expect(busy.stderr, busy.stderr).toContain('is in use by another process');
    expect(readdirSync(server.dataFile.replace(/\/[^/]+$/, '')).some((name) => name.includes('before-restore'))).toBe(
      false,
    );

    await server.stop();
    const restored = await runCli(['restore', file], { ROWI_DATA: server.dataFile }, 60_000);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    const summary = JSON.parse(restored.stdout);
    expect(summary).toMatchObject({ restored: file, into: server.dataFile, sha256: manifest.sha256, migrated: [] });
    expect(existsSync(summary.kept_aside)).toBe(true);
    expect((await expectConsistent(server.dataFile)).orders).toBe(orders);
    // The database that was there is kept aside whole, with every order placed.
    expect((await expectConsistent(summary.kept_aside)).orders).toBe(placed);

    // And rowi serves the restored database.
    const again2 = await servers.serve({ dataFile: server.dataFile, adminKey: server.adminKey, timeoutMs: 60_000 });
    const listed = await callServer(again2, 'GET', `/v1/orders?limit=1`);
    expect(listed.status).toBe(200);
  }, 120_000);

  it('rowi backup killed with SIGKILL while it copies: nothing under the final name; the next backup to it succeeds and clears what was left', async () => {
    const dataFile = tempDataFile();
    const server = await servers.serve({ dataFile, timeoutMs: 60_000 });
    await server.stop();
    // A database large enough that the copy takes a moment (about 60 MB).
    const db = await openSqliteFile(dataFile);
    db.exec('create table ballast (b blob)');
    db.exec(
      'with recursive n(i) as (select 1 union all select i + 1 from n where i < 60) insert into ballast select randomblob(1048576) from n',
    );
    db.close();

    const folder = tempFolder('backups');
    const file = join(folder, 'killed.sqlite');
    const child = spawn(process.execPath, [CLI, 'backup', file], { env: { ...process.env, ROWI_DATA: dataFile } });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const deadline = Date.now() + 20_000;
    while (!readdirSync(folder).some((name) => name.includes('.partial-')) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 5));
    child.kill('SIGKILL');
    await exited;
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.json`)).toBe(false);

    const backup = await runCli(['backup', file], { ROWI_DATA: dataFile }, 60_000);
    expect(backup.code).toBe(0);
    expect(readdirSync(folder).sort()).toEqual(['killed.sqlite', 'killed.sqlite.json']);
  }, 90_000);

  it('rowi restore refuses, changing nothing: a file that is no database, a damaged one, one from a newer rowi, one that does not match its checksum', async () => {
    const dataFile = tempDataFile();
    const server = await servers.serve({ dataFile, timeoutMs: 60_000 });
    await callServer(server, 'POST', '/v1/users', buildUser());
    const folder = tempFolder('backups');
    const good = join(folder, 'good.sqlite');
    expect((await runCli(['backup', good], { ROWI_DATA: dataFile })).code).toBe(0);
    await server.stop();
    const before = readFileSync(dataFile);

    const notDatabase = join(folder, 'notes.sqlite');
    writeFileSync(notDatabase, 'this is not a database\n'.repeat(500));
    const damaged = join(folder, 'damaged.sqlite');
    copyFileSync(good, damaged);
    await damageSqliteFile(damaged, { tree: 'users' });
    const newer = join(folder, 'newer.sqlite');
    copyFileSync(good, newer);
    const future = await openSqliteFile(newer);
    future.exec(
      `insert into kysely_migration (name, timestamp) values ('9999-from-the-future', '2030-01-01T00:00:00.000Z')`,
    );
    future.close();
    const changed = join(folder, 'changed.sqlite');
    copyFileSync(good, changed);
    writeFileSync(
      `${changed}.json`,
      readFileSync(`${good}.json`, 'utf8').replace(/"sha256": "[0-9a-f]+"/, `"sha256": "${'0'.repeat(64)}"`),
    );

    const cases: [string, string][] = [
      [notDatabase, 'is not a sound SQLite database'],
      [damaged, 'damaged.sqlite is not a sound SQLite database'],
      [newer, 'was made by a newer rowi: it has migration 9999-from-the-future'],
      [changed, 'does not match the SHA-256 its manifest records'],
      [join(folder, 'missing.sqlite'), 'there is no file at'],
    ];
    for (const [file, reason] of cases) {
      const refused = await runCli(['restore', file], { ROWI_DATA: dataFile }, 30_000);
      expect({ file, code: refused.code, stdout: refused.stdout }).toEqual({ file, code: 1, stdout: '' });
      expect(refused.stderr, file).toContain(reason);
    }
    expect(readFileSync(dataFile).equals(before)).toBe(true);
    expect(readdirSync(dataFile.replace(/\/[^/]+$/, '')).filter((name) => name.includes('restor'))).toEqual([]);
  }, 90_000);

  it('rowi restore refuses with "manifest unreadable" naming the manifest, without a stack trace, changing nothing, when the manifest beside the backup holds null, is not JSON or lacks its SHA-256', async () => {
    const dataFile = tempDataFile();
    expect((await runCli(['migrate'], { ROWI_DATA: dataFile })).code).toBe(0);
    const folder = tempFolder('backups');
    const good = join(folder, 'good.sqlite');
    expect((await runCli(['backup', good], { ROWI_DATA: dataFile })).code).toBe(0);
    const before = readFileSync(dataFile);
    const manifest = JSON.parse(readFileSync(`${good}.json`, 'utf8')) as Record<string, unknown>;
    const cases: [string, string, string][] = [
      ['null', 'null', 'holds null, not an object'],
      ['text', '{"file": "text.sqlite", ', 'is not JSON'],
      ['unsummed', JSON.stringify({ ...manifest, sha256: undefined }), 'lacks sha256'],
    ];
    for (const [name, text, reason] of cases) {
      const file = join(folder, `${name}.sqlite`);
      copyFileSync(good, file);
      writeFileSync(`${file}.json`, text);
      const refused = await runCli(['restore', file], { ROWI_DATA: dataFile }, 30_000);
      expect({ name, code: refused.code, stdout: refused.stdout }).toEqual({ name, code: 1, stdout: '' });
      expect(refused.stderr, name).toContain(`rowi: restore refused: manifest unreadable: ${file}.json ${reason}`);
      expect(refused.stderr, name).not.toMatch(/^\s+at /m);
      expect(refused.stderr.trim().split('\n'), name).toHaveLength(1);
    }
    expect(readFileSync(dataFile).equals(before)).toBe(true);
  }, 90_000);

  it('rowi restore of a backup from the rowi before this one (a migration short): puts it in place, migrates it forward, and rowi serves it', async () => {
    // The database an older rowi made: every migration of this one but the last.
    const older = join(tempFolder('backups'), 'older.sqlite');
    const previous = Object.fromEntries(Object.entries(MIGRATIONS).slice(0, -1));
    const storage = await openSqlite({ data: older, sqliteSynchronous: 'full' });
    try {
      await storage.unbounded(async (db) => {
        const { error } = await new Migrator({
          db,
          provider: { getMigrations: async () => previous },
        }).migrateToLatest();
        if (error) throw error;
      });
    } finally {
      await storage.close();
    }
    const dataFile = tempDataFile();

    const restored = await runCli(['restore', older], { ROWI_DATA: dataFile }, 60_000);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({
      restored: older,
      into: dataFile,
      kept_aside: null,
      migrated: [MIGRATION_NAMES.at(-1)],
    });
    const server = await servers.serve({ dataFile, timeoutMs: 60_000 });
    expect((await callServer(server, 'POST', '/v1/users', buildUser())).status).toBe(201);
  }, 90_000);

  it('rowi serve --workers 2 with ROWI_BACKUP_DIR: the primary takes the scheduled backup an interval after the newest one in the folder, and the metrics of the worker asked show it', async () => {
    const dataFile = tempDataFile();
    const first = await servers.serve({ dataFile, timeoutMs: 60_000 });
    await callServer(first, 'POST', '/v1/users', buildUser());
    const folder = tempFolder('backups');
    const earlier = join(folder, 'rowi-earlier.sqlite');
    expect((await runCli(['backup', earlier], { ROWI_DATA: dataFile }, 60_000)).code).toBe(0);
    await first.stop();
    // As if that backup had been taken 58 s ago: with an interval of 60 s the next is due 2 s after the start.
    const manifest = JSON.parse(readFileSync(`${earlier}.json`, 'utf8'));
    writeFileSync(
      `${earlier}.json`,
      JSON.stringify({ ...manifest, taken_at: new Date(Date.now() - 58_000).toISOString() }),
    );

    const server = await servers.serve({
      dataFile,
      adminKey: first.adminKey,
      timeoutMs: 60_000,
      env: { ROWI_WORKERS: '2', ROWI_BACKUP_DIR: folder, ROWI_BACKUP_INTERVAL: '60' },
    });
    const deadline = Date.now() + 30_000;
    while (!existsSync(join(folder, 'status.json')) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 200));
    const listed = await callServer(server, 'GET', '/v1/backups');
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((backup: { file: string }) => backup.file)).toEqual([
      expect.stringMatching(/^rowi-\d{8}T\d{6}\.\d{3}Z\.sqlite$/),
      'rowi-earlier.sqlite',
    ]);
    expect(listed.json.data[0].rows.users).toBe(1);
    const metrics = await (
      await fetch(`${server.baseUrl}/metrics`, { headers: { 'x-api-key': server.adminKey } })
    ).text();
    expect(Number(/^rowi_backup_last_success_timestamp_seconds (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThan(
      Date.now() / 1000 - 60,
    );
    expect(server.stdout()).toMatch(/"msg":"backup of [^"]+ taken: /);
  }, 120_000);

  it('rowi backup, rowi restore and ROWI_BACKUP_DIR on PostgreSQL: refused, naming its own tools', async () => {
    for (const command of ['backup', 'restore']) {
      const refused = await runCli([command, join(tempFolder('backups'), 'x.sqlite')], {
        ROWI_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      });
      expect(refused.code, command).toBe(1);
      expect(refused.stderr, command).toContain('pg_dump');
    }
    const serve = await runCli(['serve'], {
      ROWI_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      ROWI_BACKUP_DIR: tempFolder('backups'),
    });
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain('ROWI_BACKUP_DIR is set, but rowi backs up its SQLite file only');
  });
});
