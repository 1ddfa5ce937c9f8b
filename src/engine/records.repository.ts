import { sql, type Kysely } from 'kysely';
import { compiledQuery } from '../db/compiled.js';
import type { Database, Db, Executor } from '../db/database.js';
import { fetchPage, type ListQuery } from '../db/keyset.js';
import {
  compiledVisibleById,
  shows,
  sightColumnsOf,
  visibleIn,
  whereVisible,
  type OwnedTable,
  type Sight,
} from '../db/visibility.js';

/**
 * The statements of one table of versioned records (users, items, callers, a declared resource's own
 * table): read one by id and a page, each narrowed to what the sight shows where its records have an
 * owner; insert one at version 1; write one at the version read. A resource names its table and the
 * columns a record is read with; the queries are the same for every one, compiled once per table.
 */
export interface RecordTable {
  table: string;
  /** The columns a record is read with: the API fields and the version its ETag comes from. */
  columns: readonly string[];
  /** Its records have no owner: no sight narrows what is read (callers, webhook endpoints). */
  ownerless?: boolean | undefined;
}

export interface RecordQueries<Stored> {
  findById(db: Executor, id: number, sight: Sight): Promise<Stored | undefined>;
  findPage(
    db: Executor,
    query: ListQuery,
    sight: Sight,
  ): Promise<{ rows: Stored[]; nextAfter: (string | number)[] | undefined }>;
  /** Inserts the record at version 1, created and updated `now`. */
  insert(db: Executor, values: Record<string, unknown>, now: string): Promise<Stored>;
  /** Writes `values` if the row is still at `version`; undefined when it is not. */
  updateAtVersion(
    db: Executor,
    id: number,
    version: number,
    values: Record<string, unknown>,
    now: string,
  ): Promise<Stored | undefined>;
}

/**
 * The table as a query builder sees one it knows only by name: Kysely's types list rowi's own
 * tables, and a declared resource brings its table with it.
 */
type Untyped = Kysely<Record<string, Record<string, unknown>>>;
const untyped = (db: Executor) => db as unknown as Untyped;
/** What the typed helpers (paging, visibility) take: the same builder, typed as one of rowi's tables. */
type Typed = Kysely<Database>;

export function recordQueries<Stored>({ table, columns, ownerless }: RecordTable): RecordQueries<Stored> {
  const owned = table as OwnedTable;
  const select = (db: Executor) =>
    (untyped(db) as unknown as Typed).selectFrom(table as 'users').select(columns as 'id'[]);
  const byIdOnly = (db: Executor, id: number) => select(db).where('id', '=', id);
  const any = compiledQuery(byIdOnly);
  const byId = ownerless ? (db: Executor, id: number) => any(db, id) : compiledVisibleById(owned, byIdOnly);
  const visible = <Query extends Parameters<typeof whereVisible>[0]>(query: Query, sight: Sight) =>
    ownerless ? query : whereVisible(query, owned, sight);
  // A record kept in the read cache is read whole, whoever asks; the sight is then applied to it.
  // Asked at the first read: a declared resource's table becomes an owned table when the app is built.
  let cacheable: boolean | undefined;
  const shown = (row: Record<string, unknown>, sight: Sight) => ownerless || shows(owned, sight, row);
  return {
    async findById(db, id, sight) {
      cacheable ??= ownerless || sightColumnsOf(owned).every((column) => columns.includes(column));
      const cache = cacheable && !db.isTransaction ? (db as Db).readCache : undefined;
      if (cache === undefined || !cache.enabled) {
        const [row] = await byId(db, id, sight);
        return row as Stored | undefined;
      }
      let row = cache.get<Record<string, unknown>>(table, id);
      if (row === undefined) {
        const generation = cache.generation();
        [row] = (await any(db, id)) as Record<string, unknown>[];
        if (row === undefined) return undefined;
        cache.keep(table, id, row, generation);
      }
      return shown(row, sight) ? (row as Stored) : undefined;
    },
    async findPage(db, query, sight) {
      const page = await fetchPage(visible(select(db), sight), query);
      return page as unknown as { rows: Stored[]; nextAfter: (string | number)[] | undefined };
    },
    async insert(db, values, now) {
      const row = await untyped(db)
        .insertInto(table)
        .values({ ...values, version: 1, created_at: now, updated_at: now })
        .returning(columns)
        .executeTakeFirstOrThrow();
      return row as Stored;
    },
    async updateAtVersion(db, id, version, values, now) {
      const row = await untyped(db)
        .updateTable(table)
        .set({ ...values, version: version + 1, updated_at: now })
        .where('id', '=', id)
        .where('version', '=', version)
        .returning(columns)
        .executeTakeFirst();
      return row as Stored | undefined;
    },
  };
}

/**
 * The records whose key column holds one of `keys` (an import's chunk), each with whether the sight
 * shows it: a key is taken whoever's record has it, but only a record the sight shows may be
 * changed or skipped as the importer's own.
 */
export async function findByKeys<Stored>(
  db: Executor,
  { table, columns }: RecordTable,
  column: string,
  keys: readonly string[],
  resource: string,
  sight: Sight,
): Promise<(Stored & { visible: boolean })[]> {
  if (keys.length === 0) return [];
  const shown = visibleIn(resource as OwnedTable, sight, table);
  const rows = await untyped(db)
    .selectFrom(table)
    .select(columns)
    .select(
      shown === undefined
        ? sql<number>`1`.as('visible')
        : sql<number>`case when ${shown} then 1 else 0 end`.as('visible'),
    )
    .where(column, 'in', [...keys])
    .execute();
  return rows.map((row) => ({ ...row, visible: Number(row.visible) === 1 }) as Stored & { visible: boolean });
}

/**
 * Inserts many records at version 1 in one statement; with a key column, a row whose key is taken
 * meanwhile (a concurrent request) is left out. The records inserted, in no promised order.
 */
export async function insertMany<Stored>(
  db: Executor,
  { table, columns }: RecordTable,
  rows: readonly Record<string, unknown>[],
  now: string,
  keyColumn?: string,
): Promise<Stored[]> {
  if (rows.length === 0) return [];
  const insert = untyped(db)
    .insertInto(table)
    .values(rows.map((row) => ({ ...row, version: 1, created_at: now, updated_at: now })));
  const guarded =
    keyColumn === undefined ? insert : insert.onConflict((conflict) => conflict.column(keyColumn).doNothing());
  return (await guarded.returning(columns).execute()) as Stored[];
}
