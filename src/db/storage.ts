import { Kysely, type Dialect } from 'kysely';
import { withCommits, type Commits } from './commits.js';
import type { CorruptionWatch } from './corruption.js';
import type { Database, Db } from './database.js';
import { withOutage, type DatabaseOutage } from './outage.js';
import type { Signals } from './signals.js';
import type { ReadCache } from './read-cache.js';

/** An open database, SQLite (connect.ts) or PostgreSQL (postgres.ts), with what rowi keeps beside it. */
export interface Storage {
  db: Db;
  kind: 'sqlite' | 'postgres';
  /** What the banner and logs say about where data lives (never a password). */
  describe: string;
  /** Word between the processes sharing this database (cache invalidation). */
  signals: Signals;
  /** Whether the database was found damaged, and the refusal of writes after it (corruption.ts). */
  corruption: CorruptionWatch;
  /**
   * Runs work on a connection of its own without the statement time limit: migrations, which
   * may wait for another instance's migration and may take long on large tables.
   */
  unbounded<T>(work: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * A handle on the database through `dialect`, with the Commits its units of work tell and the
 * outage it reports to: new Commits for a database's own handle, or those of the handle it stands
 * beside.
 */
export function databaseHandle(dialect: Dialect, outage: DatabaseOutage, commits?: Commits, cache?: ReadCache): Db {
  const db = withOutage(withCommits(new Kysely<Database>({ dialect }), commits), outage);
  return cache === undefined ? db : Object.assign(db, { readCache: cache });
}

/**
 * Runs `work` on a handle of its own through `dialect` (Storage#unbounded), which tells `db`'s
 * Commits and reports to its outage, and closes that handle once the work has ended.
 */
export async function withHandleBeside<T>(db: Db, dialect: Dialect, work: (db: Db) => Promise<T>): Promise<T> {
  const beside = databaseHandle(dialect, db.outage, db.commits);
  try {
    return await work(beside);
  } finally {
    await beside.destroy();
  }
}
