import { sql } from 'kysely';
import type { Database, Db } from './database.js';
import { isSqlite } from './dialect.js';

/** How a growing table is measured: what its rows are counted by, and where its oldest row's time is. */
export interface TableShape {
  table: keyof Database & string;
  /**
   * An integer key that grows with every row (id, seq): the rows are estimated as the span of its
   * values, two lookups in its index. Without one, SQLite's rowid serves, and on PostgreSQL the
   * planner's statistics (pg_class.reltuples, kept by autovacuum).
   */
  key?: string;
  /** The column whose least value (in its index) finds the oldest row; the key by default. */
  oldestBy?: string;
  /** The column that holds the row's time (RFC 3339), or that `timeOf` reads it from; none: its rows have no time, and only their number is measured. */
  time?: string;
  timeOf?: (value: string) => string;
}

/** At most this many rows are counted for a PostgreSQL table without a key that was never analysed. */
const COUNT_AT_MOST = 1_000_000;

/**
 * The rows of a table, estimated without reading them (an upper bound where keys were skipped or
 * rows deleted from the middle), and the time of its oldest row (null: empty). Each is one or two
 * lookups in an index, whatever the table's size: a 5-million-row table is never counted.
 */
export async function estimateTable(db: Db, shape: TableShape): Promise<{ rows: number; oldest: string | null }> {
  const table = sql.table(shape.table);
  const key = shape.key ?? (isSqlite(db) ? 'rowid' : undefined);
  let rows: number;
  if (key !== undefined) {
    const span = await sql<{ low: number | string | null; high: number | string | null }>`
      select min(${sql.ref(key)}) as low, max(${sql.ref(key)}) as high from ${table}`.execute(db);
    const { low, high } = span.rows[0] ?? { low: null, high: null };
    rows = low === null || high === null ? 0 : Number(high) - Number(low) + 1;
  } else {
    const statistics = await sql<{ reltuples: number | string }>`
      select reltuples from pg_class where oid = to_regclass(${shape.table})`.execute(db);
    rows = Number(statistics.rows[0]?.reltuples ?? -1);
    if (rows < 0) {
      const counted = await sql<{ count: number | string }>`
        select count(*) as count from (select 1 from ${table} limit ${COUNT_AT_MOST}) as bounded`.execute(db);
      rows = Number(counted.rows[0]?.count ?? 0);
    }
  }
  if (shape.time === undefined) return { rows: Math.round(rows), oldest: null };
  const oldestBy = shape.oldestBy ?? shape.key ?? shape.time;
  const first = await sql<{ time: string }>`
    select ${sql.ref(shape.time)} as time from ${table} order by ${sql.ref(oldestBy)} limit 1`.execute(db);
  const time = first.rows[0]?.time;
  return { rows: Math.round(rows), oldest: time === undefined ? null : (shape.timeOf?.(time) ?? time) };
}
