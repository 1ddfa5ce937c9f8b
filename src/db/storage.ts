import type { CorruptionWatch } from './corruption.js';
import type { Db } from './database.js';
import type { Signals } from './signals.js';

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
