import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { backupSqlite } from '../../src/db/backup.js';
import { openSqlite } from '../../src/db/connect.js';
import { migrateStorage } from '../../src/db/migrate.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';
import { tempFolder } from '../helpers/temp.js';

/** The fields of /proc/PID/stat after "(comm)": state, ppid, … (undefined once the process or thread ended). */
function statOf(path: string): string[] | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** The nice value of each thread of a process (Linux: /proc/PID/task/ID/stat, the 19th field). */
function niceOfThreads(pid: number | 'self'): number[] {
  let threads: string[] = [];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    // The process ended.
  }
  return threads
    .map((id) => Number(statOf(`/proc/${pid}/task/${id}/stat`)?.[16]))
    .filter((nice) => !Number.isNaN(nice));
}

/** The processes this one started that run now. */
function childProcesses(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(statOf(`/proc/${entry}/stat`)?.[1]) === process.pid)
    .map(Number);
}

/** The copy goes in steps of a few MB (backup-child.js) beside writers: what it must still be. */
describe('a backup of the SQLite file taken in steps while another connection writes', () => {
  it.runIf(process.platform === 'linux')(
    'backupSqlite beside a connection that commits all along: the copy is the snapshot of its start, checked, taken in a process of its own whose every thread is at nice 19, while this process keeps its priority',
    async () => {
      const data = join(tempFolder('data'), 'rowi.db');
      const storage = await openSqlite({ data, sqliteSynchronous: 'normal' });
      await migrateStorage(storage);
      await storage.close();
      const writer = await openSqliteFile(data);
      // About 24 MB: six steps of the copy, so that commits land between its steps.
      writer.exec('create table filler (id integer primary key, body blob)');
      writer.exec(`with recursive n(i) as (select 1 union all select i + 1 from n where i < 6000)
                   insert into filler (body) select randomblob(4000) from n`);
      writer.exec('create table ticks (id integer primary key)');
      const ownNice = niceOfThreads('self');

      let done = false;
      const target = join(tempFolder('backups'), 'copy.sqlite');
      const backup = backupSqlite(data, target).finally(() => (done = true));
      let lowest = false;
      // One commit every few milliseconds until the backup ends (at most 12,000, about 2 minutes: the
      // copy runs at nice 19, and waits while another test file keeps both cores busy).
      for (let tick = 0; tick < 12_000 && !done; tick++) {
        writer.exec('insert into ticks default values');
        lowest ||= childProcesses().some(
          (pid) => niceOfThreads(pid).length > 1 && niceOfThreads(pid).every((nice) => nice === 19),
        );
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const ticksWhenDone = writer.get<{ n: number }>('select count(*) as n from ticks')!.n;
      const manifest = await backup;
      writer.exec('insert into ticks default values');
      const ticksAfter = writer.get<{ n: number }>('select count(*) as n from ticks')!.n;
      writer.close();

      expect(done).toBe(true);
      expect(manifest.rows).toMatchObject({ filler: 6000 });
      // The writes went on through the copy, and the copy holds none made after its start.
      expect(ticksWhenDone).toBeGreaterThan(manifest.rows.ticks! + 5);
      expect(ticksAfter).toBe(ticksWhenDone + 1);
      expect(manifest.bytes).toBeGreaterThan(24_000_000);
      expect(lowest).toBe(true);
      expect(niceOfThreads('self')).not.toContain(19);
      expect(ownNice).not.toContain(19);
      // A file of its own: not in WAL mode (header bytes 18 and 19 are 1).
      expect([...readFileSync(target).subarray(18, 20)]).toEqual([1, 1]);
    },
    180_000,
  );
});
