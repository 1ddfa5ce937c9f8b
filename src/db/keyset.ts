import { sql, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { withArrayRows } from './array-rows.js';
import type { Database } from './database.js';

/**
 * Keyset paging in SQL, for any collection: filters, a total order (the sort keys, ending with
 * the unique id) and "after this row" expressed as a comparison on those keys, so a page costs
 * one index range scan however deep it is, and rows inserted meanwhile never shift a page.
 */
export interface SortKey {
  column: string;
  direction: 'asc' | 'desc';
}

export interface ListQuery {
  limit: number;
  order: SortKey[];
  conditions: ListCondition[];
  /** Sort-key values of the last row of the previous page. */
  after: (string | number)[] | undefined;
  /**
   * Rows to skip: only an export's check of its size (is there a row past the cap?) uses it,
   * reading one row; pages are keyset pages, never offsets.
   */
  offset?: number;
}

export type ListCondition =
  | { column: string; operator: '=' | '>' | '<'; value: string | number }
  | { column: string; operator: 'in'; value: readonly (string | number)[] }
  /** The path `value` and those below it: /v1/orders/12 and /v1/orders/12/cancel, not /v1/orders/123. */
  | { column: string; operator: 'under'; value: string }
  /** From the first to the second, both included. */
  | { column: string; operator: 'between'; value: readonly [number, number] }
  /** `value` occurs in any of `columns`, ASCII letters in either case (see `contains`). */
  | { columns: readonly string[]; operator: 'contains'; value: string };

export async function fetchPage<TB extends keyof Database, Row extends Record<string, unknown>>(
  query: SelectQueryBuilder<Database, TB, Row>,
  list: ListQuery,
): Promise<{ rows: Row[]; nextAfter: (string | number)[] | undefined }> {
  const rows = await pageQuery(query, list).execute();
  if (rows.length <= list.limit) return { rows, nextAfter: undefined };
  rows.length = list.limit;
  const last = rows[rows.length - 1]!;
  return { rows, nextAfter: list.order.map((key) => last[key.column] as string | number) };
}

/**
 * fetchPage with the rows as arrays of the values of `columns`, the columns `query` selects in
 * that order (db/array-rows.ts): for the reads of an export; each sort key must be one of them.
 */
export async function fetchArrayPage<TB extends keyof Database, Row extends Record<string, unknown>>(
  query: SelectQueryBuilder<Database, TB, Row>,
  list: ListQuery,
  columns: readonly string[],
): Promise<{ rows: unknown[][]; nextAfter: (string | number)[] | undefined }> {
  const rows = (await withArrayRows(pageQuery(query, list)).execute()) as unknown as unknown[][];
  if (rows.length <= list.limit) return { rows, nextAfter: undefined };
  rows.length = list.limit;
  const last = rows[rows.length - 1]!;
  return { rows, nextAfter: list.order.map((key) => last[columns.indexOf(key.column)] as string | number) };
}

/** The query of one page: its conditions, after the row before, in its order, one row more than it holds. */
function pageQuery<TB extends keyof Database, Row extends Record<string, unknown>>(
  query: SelectQueryBuilder<Database, TB, Row>,
  list: ListQuery,
): SelectQueryBuilder<Database, TB, Row> {
  let page = query;
  for (const condition of list.conditions) page = page.where(whereOf(condition));
  if (list.after) page = page.where(after(list.order, list.after));
  for (const key of list.order) page = page.orderBy(sql.ref(key.column), key.direction);
  if (list.offset !== undefined) page = page.offset(list.offset);
  return page.limit(list.limit + 1);
}

function whereOf(condition: ListCondition): RawBuilder<SqlBool> {
  if (condition.operator === 'contains') return contains(condition.columns, condition.value);
  const column = sql.ref(condition.column);
  switch (condition.operator) {
    case 'in':
      return sql<SqlBool>`${column} in (${sql.join(condition.value)})`;
    case 'between':
      return sql<SqlBool>`${column} between ${condition.value[0]} and ${condition.value[1]}`;
    case 'under':
      return under(column, condition.value);
    default:
      return sql<SqlBool>`${column} ${sql.raw(condition.operator)} ${condition.value}`;
  }
}

/**
 * The path itself, or a path that goes on below it after a `/` (a path that ends in `/` is its own
 * boundary). The prefix is matched with LIKE, its `%`, `_` and `\` escaped so that they stand for
 * themselves; SQLite's LIKE ignores the case of ASCII letters (where PostgreSQL's does not), and
 * paths are case-sensitive, so the prefix is compared exactly as well, on the rows LIKE keeps.
 */
function under(column: RawBuilder<unknown>, path: string): RawBuilder<SqlBool> {
  const prefix = path.endsWith('/') ? path : `${path}/`;
  const pattern = `${prefix.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;
  return sql<SqlBool>`(${column} = ${path} or (${column} like ${pattern} escape '\\' and substr(${column}, 1, length(cast(${prefix} as text))) = ${prefix}))`;
}

/**
 * The text anywhere in any of the columns, both sides through lower(), which folds ASCII letters only
 * on both databases: SQLite's lower() knows no other, and PostgreSQL's text columns are collate "C"
 * (db/migrations/portable.ts), where lower() folds A–Z alone. So É matches É, never é, on either.
 * `%`, `_` and `\` in the text are escaped to stand for themselves. No index serves it: it reads
 * every row the other conditions leave.
 */
function contains(columns: readonly string[], text: string): RawBuilder<SqlBool> {
  const pattern = `%${text.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;
  const matches = columns.map((column) => sql`lower(${sql.ref(column)}) like lower(${pattern}) escape '\\'`);
  return sql<SqlBool>`(${sql.join(matches, sql` or `)})`;
}

/**
 * (k1, k2, …) strictly after (v1, v2, …) in the given directions:
 *   k1 ▷ v1  OR  (k1 = v1 AND k2 ▷ v2)  OR  …   where ▷ is > for asc and < for desc.
 * Written out rather than as a row-value comparison because directions may differ per key.
 */
function after(order: SortKey[], values: (string | number)[]): RawBuilder<SqlBool> {
  const alternatives = order.map((key, index) => {
    const equalities = order.slice(0, index).map((previous, at) => sql`${sql.ref(previous.column)} = ${values[at]}`);
    const step = sql`${sql.ref(key.column)} ${sql.raw(key.direction === 'asc' ? '>' : '<')} ${values[index]}`;
    return sql`(${sql.join([...equalities, step], sql` and `)})`;
  });
  return sql<SqlBool>`(${sql.join(alternatives, sql` or `)})`;
}
