import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCheckpoints } from '../../src/db/checkpoints.js';
import { openPlainConnection } from '../../src/db/sqlite-plain.js';

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('WAL checkpoints under writes that never stop', () => {
  it(
    'the write-ahead log stops growing: it starts again from its beginning though a writer commits all along',
    { timeout: 120_000 },
    async () => {
      const folder = mkdtempSync(join(tmpdir(), 'rowi-checkpoints-'));
      folders.push(folder);
      const file = join(folder, 'rowi.sqlite');
      // An empty file is an empty database (the plain connection opens only a file that exists).
      writeFileSync(file, '');
      // The driver rowi uses on this Node.js (node:sqlite, or better-sqlite3 on Node 20), as rowi's writer sets it up.
      const writer = await openPlainConnection(file, [
        'journal_mode = WAL',
        'synchronous = NORMAL',
        'wal_autocheckpoint = 0',
        // rowi's writer waits for the lock off the event loop (sqlite-lock.ts) while a RESTART holds it; this one waits in SQLite.
        'busy_timeout = 1000',
        // As rowi's writer has it (64 MB there): a log started again is cut back to this on the next commit.
        'journal_size_limit = 1048576',
      ]);
      writer.exec('create table rows (id integer primary key, body text not null)');
      const insert = `insert into rows (body) values ('${'x'.repeat(400)}');`;
      const group = `begin; ${insert.repeat(20)} commit;`;
      const checkpoints = startCheckpoints(file, 'NORMAL', undefined, { restartPages: 1000 });
      const sizes: number[] = [];
      try {
        // Commits back to back, as a group commit does under load (a turn of the event loop between
        // them), until 40 MB are written (about 8 s here; a busy machine takes longer, up to 60 s).
        // The log is started again only when the checkpoint thread's RESTART finds a moment between
        // two commits, at 11-17 MB of log here (frames, headers and all): 40 MB leaves it room.
        const until = performance.now() + 60_000;
        while (sizes.length * 20 * 400 < 40 * 1024 * 1024 && performance.now() < until) {
          writer.exec(group);
          sizes.push(statSync(`${file}-wal`).size);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      } finally {
        await checkpoints.close();
        writer.close();
      }
      const written = (sizes.length * 20 * 400) / 1024 / 1024;
      // Started again from its beginning (then cut back to 1 MB) every time it passed about 1,000
      // pages of 4 KB: never as long as all that was written (without the RESTART it only grew).
      const restarts = sizes.filter((size, index) => index > 0 && size < sizes[index - 1]! / 2).length;
      const largest = Math.max(...sizes) / 1024 / 1024;
      expect(written, 'enough written to pass the bound many times').toBeGreaterThan(30);
      expect(
        restarts,
        `${written.toFixed(0)} MB written in ${sizes.length} commits, the log at most ${largest.toFixed(1)} MB`,
      ).toBeGreaterThanOrEqual(2);
      expect(largest).toBeLessThan(written);
    },
  );
});
