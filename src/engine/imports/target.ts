import { setImmediate as turn } from 'node:timers/promises';
import type { TSchema } from 'typebox';
import type { Scope } from '../../auth/policy.js';
import type { Executor, Trx } from '../../db/database.js';
import { isSqlite } from '../../db/dialect.js';
import type { Budget } from '../../rate-limits/rate-limiter.js';
import type { ImportTargetName, RowError } from '../operations/operations.schema.js';
import type { RequestAccess } from '../../auth/access.js';

export type { RowError };

/**
 * A collection an import writes (docs/bulk.md "Imports"): the columns of its CSV files, the schema
 * each row is checked against (the same as its single request's body), its natural key, and how
 * a chunk of checked rows is written, set-based: a few multi-row statements for the whole chunk,
 * with every row's event and stock movement, in the chunk's unit of work. `Value` is a row as its
 * schema checked it; the runner, which knows no target's rows, holds them as `never`.
 */
export interface ImportTarget<Value = never> {
  name: ImportTargetName;
  /** The collection's path: `${path}/import` takes the files; a row's record is at `${path}/{id}`. */
  path: string;
  /** The scopes an import needs beyond operations (creating and changing the records it writes). */
  scopes: readonly Scope[];
  /** The audit record's resource. */
  resource: string;
  /** The columns a CSV header may name, and those it must. */
  columns: readonly string[];
  required: readonly string[];
  /** What the import's description in the document says besides the common words (a CSV record of several rows). */
  note?: string;
  /** A row, as the document shows an NDJSON line. */
  example: Record<string, unknown>;
  /** One row as JSON (an NDJSON line, or a CSV row made into one by fromCsv). */
  schema: TSchema;
  /** A CSV row's text cells as the JSON the schema checks: integers read as integers, empty cells left out. */
  fromCsv(cells: Record<string, string>): Record<string, unknown>;
  /**
   * CSV only, for a record of several rows (an order and its lines): consecutive rows with the same
   * value in column `by` are one record, made into one by `fromCsvRows` (each row an item of its
   * array member `member`, at most `max` rows); fromCsv is then not used.
   */
  csvGroup?: CsvGroup;
  /** The natural key two rows of one file may not share but by on_conflict's rule (an item's SKU, a user's email). */
  keyOf?(value: Value): string;
  /** The field that holds the natural key (sku, email), named in a duplicate's error. */
  keyField?: string;
  /** The path of the record a row wrote (its audit record's path). */
  recordPath(id: number): string;
  /**
   * The rate-limit budget each row spends from, as its single request does on top of the caller's
   * own (orders: orders-create, one unit an order): spent as the import runs (engine/imports/run.ts).
   */
  rateLimitBudget?: Budget;
  /** Rows a chunk writes at most when not CHUNK_ROWS (orders: a record is many statements, so fewer). */
  chunkRows?: number;
  /** Writes the chunk's rows (checked, no two with one key); what became of each, and the refused ones. */
  write(trx: Trx, rows: readonly ImportRow<Value>[], context: ImportContext): Promise<ChunkOutcome>;
}

export interface ImportRow<Value = never> {
  /** The file's row (CSV: the header is row 1; NDJSON: the line). */
  row: number;
  value: Value;
}

export interface ImportContext {
  onConflict: 'error' | 'skip' | 'update';
  /**
   * The access of the request that started the import, as the single request's code takes it:
   * what it may see and refer to (auth/visibility.ts sightOf) and who owns what it creates (creatorOf).
   */
  access: RequestAccess;
  now: string;
  /** A check pass (dry_run, atomic's first pass): every chunk written is rolled back after it. */
  checking: boolean;
  /**
   * Whether a chunk's writes give the event loop turns between statements: on the event loop that
   * answers requests, yes; on the import thread (process/import-thread-entry.ts), where no request
   * waits for one, no.
   */
  turns: boolean;
  /** What a target keeps from one chunk of a pass to the next (orders: the stock earlier checked chunks reserved). */
  carried: Map<number, number>;
}

export interface CsvGroup {
  by: string;
  member: string;
  max: number;
  fromCsvRows(
    rows: readonly Record<string, string>[],
  ): { value: Record<string, unknown> } | { field: string; detail: string };
}

/** What a row did: its record was created, updated, or left alone (skipped, or it changed nothing). */
export interface RowWritten {
  row: number;
  outcome: 'created' | 'updated' | 'skipped';
  /** The record's id (none when skipped). */
  id?: number;
}

export interface ChunkOutcome {
  written: RowWritten[];
  errors: RowError[];
}

/** A chunk's outcome as its writer learns it, a row at a time: what each row wrote, or why it was refused. */
export class ChunkReport implements ChunkOutcome {
  readonly written: RowWritten[] = [];
  readonly errors: RowError[] = [];

  /** The row's record was created, updated or left alone; `id` is the record's (none when a skipped row's was not read). */
  wrote(row: number, outcome: RowWritten['outcome'], id?: number): void {
    this.written.push(id === undefined ? { row, outcome } : { row, outcome, id });
  }

  /** The row is refused: the column or member concerned (null: the whole row), the problem type and what is wrong. */
  refused(row: number, field: string | null, problem: string, detail: string): void {
    this.errors.push({ row, field, problem, detail });
  }
}

/**
 * A CSV cell that holds an integer, as a JSON integer when it is written in decimal digits (so the
 * schema checks its range); any other text is left as text, which the schema then refuses.
 */
export function integerCell(cells: Record<string, string>, name: string): Record<string, unknown> {
  const text = cells[name];
  if (text === undefined) return {};
  return { [name]: /^-?(0|[1-9][0-9]{0,15})$/.test(text) ? Number(text) : text };
}

/** Rows written by one statement of a chunk before the event loop is given a turn (SQLite). */
const ROWS_PER_TURN = 128;
/**
 * Writes `rows` a slice at a time (ROWS_PER_TURN, the rows of one compiled multi-row insert),
 * giving the event loop a turn between slices: SQLite runs a statement on the event loop, so a
 * chunk's 1,000-row statement would keep every request waiting while it runs (the GET p99 alongside
 * an import); slices keep each wait to one statement's time. On PostgreSQL a statement runs on the
 * server while the event loop goes on, so the rows go at once, in as few statements as
 * compiledRowInserts makes (fewer round trips); and so they do on the import thread.
 */
export async function inSlices<Row, Result>(
  db: Executor,
  context: Pick<ImportContext, 'turns'>,
  rows: readonly Row[],
  write: (slice: Row[]) => Promise<readonly Result[] | void>,
): Promise<Result[]> {
  const step = isSqlite(db) && context.turns ? ROWS_PER_TURN : Math.max(1, rows.length);
  const results: Result[] = [];
  for (let start = 0; start < rows.length; start += step) {
    if (start > 0) await turn();
    const written = await write(rows.slice(start, start + step));
    if (written) results.push(...written);
  }
  return results;
}
