import { closeSync, openSync, writeSync } from 'node:fs';
import { openSqliteFile } from './sqlite-file.js';

/**
 * Damage done to a real SQLite file, as a failing disk or a stray write does it: bytes of one page
 * overwritten. `tree` names a table or an index (its root page, whose b-tree header is garbled,
 * so SQLite cannot miss it), or `header` the file's first 100 bytes. Everything written is first
 * copied back from the write-ahead log into the file (a checkpoint), so the damage is what is read.
 */
export async function damageSqliteFile(file: string, where: { tree: string } | 'header'): Promise<{ page: number }> {
  const connection = await openSqliteFile(file);
  let page = 1;
  let pageSize: number;
  try {
    connection.exec('pragma wal_checkpoint(TRUNCATE)');
    pageSize = connection.get<{ page_size: number }>('pragma page_size')!.page_size;
    if (where !== 'header') {
      const root = connection.get<{ rootpage: number }>(
        'select rootpage from sqlite_schema where name = ?',
        where.tree,
      );
      if (root === undefined) throw new Error(`${file} has no table or index ${where.tree}`);
      page = root.rootpage;
    }
  } finally {
    connection.close();
  }
  // A b-tree page begins with its header (page 1 after the file's 100-byte header): its type byte
  // 0xEE and the cell count and offsets that follow are no b-tree's.
  const offset = where === 'header' ? 0 : (page - 1) * pageSize + (page === 1 ? 100 : 0);
  const garbage = Buffer.alloc(where === 'header' ? 100 : 12, 0xee);
  const descriptor = openSync(file, 'r+');
  try {
    writeSync(descriptor, garbage, 0, garbage.length, offset);
  } finally {
    closeSync(descriptor);
  }
  return { page };
}

/**
 * Commits a change no table holds (the schema's user_version) on a connection of its own: every
 * other connection to the file then drops the pages it had cached, and reads them, damage and
 * all, from the file again.
 */
export async function commitElsewhere(file: string): Promise<void> {
  const connection = await openSqliteFile(file);
  try {
    connection.exec('pragma user_version = 7');
  } finally {
    connection.close();
  }
}
