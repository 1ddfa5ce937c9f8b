import { SqliteAdapter, type Kysely } from 'kysely';

/** True on SQLite; the few places where the two databases differ branch on it. */
export function isSqlite(db: Pick<Kysely<never>, 'getExecutor'>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
