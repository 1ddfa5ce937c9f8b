import type BetterSqlite3 from 'better-sqlite3';
import { wantsArrayRows } from './array-rows.js';
/**
 * One SQLite connection, whichever driver the running Node.js has: its own `node:sqlite` (Node
 * 22.13 and later, Node 24 LTS: nothing to compile at install), else better-sqlite3 (Node 20,
 * installed through the optional package packages/sqlite-node20, which npm installs only there).
 * better-sqlite3 12 aborts on Node 24 and 13 crashes on Node 20, so one code path over both
 * drivers is what lets rowi run on both; above this file nothing knows which one it is.
 *
 * Statements are prepared once per SQL text and kept (Kysely's SQLite driver prepares every
 * statement anew, and preparing costs more than running a read by key).
 */
export interface SqliteConnectionHandle {
  prepare(sql: string): SqliteStatement;
  /** Whether a transaction is open on the connection (SQLite ends one by itself on some errors). */
  readonly inTransaction: boolean;
  close(): void;
}

export interface SqliteStatement {
  /** Whether the statement returns rows. */
  readonly reader: boolean;
  all(parameters: readonly unknown[]): unknown[];
  run(parameters?: readonly unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

export interface SqliteConnectionOptions {
  synchronous: 'full' | 'normal';
  /** Milliseconds SQLite itself waits for another connection's lock (0: none, the driver waits instead). */
  busyTimeoutMs: number;
  readOnly?: boolean;
  /** Statements kept prepared at most (the least recently prepared go first). */
  statements?: number;
  /** Sees every statement of the connection: how storage learns of damage, and refuses writes after it (corruption.ts). */
  guard?: StatementGuard;
}

export interface StatementGuard {
  /** Called before a statement runs, with its SQL: throws to refuse it. */
  before?(sql: string): void;
  /** Called with every error preparing or running a statement throws, before it is thrown on. */
  failed?(error: unknown): void;
}

export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3';

/** The driver this Node.js uses: node:sqlite where it has it, else better-sqlite3. */
export async function sqliteDriverName(): Promise<SqliteDriverName> {
  return (await nodeSqlite()) !== undefined ? 'node:sqlite' : 'better-sqlite3';
}

/**
 * Opens a connection: WAL journal, the synchronous mode asked for (FULL: a commit is on disk
 * before it is acknowledged; set on every open, since better-sqlite3 defaults to NORMAL under
 * WAL), foreign keys on, and the busy timeout asked for.
 */
export async function openSqliteConnection(
  file: string,
  options: SqliteConnectionOptions,
): Promise<SqliteConnectionHandle> {
  const native = await nodeSqlite();
  const connection =
    native !== undefined ? openNodeSqlite(native, file, options) : await openBetterSqlite3(file, options);
  const settings = [
    ...(options.readOnly ? [] : ['journal_mode = WAL']),
    `synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`,
    'foreign_keys = ON',
    `busy_timeout = ${options.busyTimeoutMs}`,
  ];
  for (const setting of settings) execute(connection.prepare(`pragma ${setting}`));
  return withStatementCache(connection, options.statements ?? 500, options.guard);
}

/** Runs a statement whether or not it returns rows (better-sqlite3 refuses all() on one that does not). */
export function execute(statement: SqliteStatement, parameters: readonly unknown[] = []): unknown[] {
  if (statement.reader) return statement.all(parameters);
  statement.run(parameters);
  return [];
}

// node:sqlite's types are not in @types/node 20, the oldest Node rowi supports: what rowi uses of it.
interface NodeSqliteModule {
  DatabaseSync: new (
    file: string,
    options: { readOnly?: boolean; timeout?: number; enableForeignKeyConstraints?: boolean },
  ) => NodeSqliteDatabase;
}
interface NodeSqliteDatabase {
  prepare(sql: string): {
    columns(): unknown[];
    /** Node 22.16 and later. */
    setReturnArrays?(enabled: boolean): void;
    all(...parameters: unknown[]): unknown[];
    run(...parameters: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  };
  readonly isTransaction: boolean;
  close(): void;
}

let nodeSqliteModule: Promise<NodeSqliteModule | undefined> | undefined;

function nodeSqlite(): Promise<NodeSqliteModule | undefined> {
  // Not there before Node 22.5, and behind a flag until 22.13: then better-sqlite3 serves.
  nodeSqliteModule ??= import('node:sqlite' as string).then(
    (module: unknown) => module as NodeSqliteModule,
    () => undefined,
  );
  return nodeSqliteModule;
}

function openNodeSqlite(
  module: NodeSqliteModule,
  file: string,
  options: SqliteConnectionOptions,
): SqliteConnectionHandle {
  const database = new module.DatabaseSync(file, {
    readOnly: options.readOnly ?? false,
    timeout: options.busyTimeoutMs,
    enableForeignKeyConstraints: true,
  });
  return {
    prepare(sql) {
      const statement = database.prepare(sql);
      const reader = statement.columns().length > 0;
      const arrays = reader && wantsArrayRows(sql);
      if (arrays && statement.setReturnArrays) statement.setReturnArrays(true);
      // Without setReturnArrays (before 22.16), the objects' values: their columns' order.
      const asArrays = arrays && !statement.setReturnArrays;
      return {
        reader,
        all: asArrays
          ? (parameters) => statement.all(...parameters).map((row) => Object.values(row as object))
          : (parameters) => statement.all(...parameters),
        run: (parameters = []) => {
          const { changes, lastInsertRowid } = statement.run(...parameters);
          return { changes: Number(changes), lastInsertRowid };
        },
      };
    },
    get inTransaction() {
      return database.isTransaction;
    },
    close: () => database.close(),
  };
}

/**
 * better-sqlite3 binds an array given as one argument element by element through V8's generic
 * property lookup, and values given as arguments directly: for a multi-row insert of an import
 * (about 45 values a row) that is 0.1–0.15 µs a value less (bench/NOTES.md "Imports"). Past
 * this many the array goes as it is, so a long IN list never spreads onto the stack.
 */
const MAX_SPREAD_PARAMETERS = 4096;

async function openBetterSqlite3(file: string, options: SqliteConnectionOptions): Promise<SqliteConnectionHandle> {
  let Database: typeof BetterSqlite3;
  try {
    Database = (await import('better-sqlite3')).default;
  } catch (error) {
    throw new Error(
      `this Node.js (${process.version}) has no node:sqlite, and better-sqlite3 is not installed (npm installs it on Node 20 only): use Node.js 22.13 or later, or reinstall on Node 20 (${(error as Error).message})`,
    );
  }
  const database = new Database(file, { readonly: options.readOnly ?? false, timeout: options.busyTimeoutMs });
  return {
    prepare(sql) {
      const statement = database.prepare(sql);
      if (statement.reader && wantsArrayRows(sql)) statement.raw(true);
      return {
        reader: statement.reader,
        all: (parameters) =>
          parameters.length <= MAX_SPREAD_PARAMETERS ? statement.all(...parameters) : statement.all(parameters),
        run: (parameters = []) =>
          parameters.length <= MAX_SPREAD_PARAMETERS ? statement.run(...parameters) : statement.run(parameters),
      };
    },
    get inTransaction() {
      return database.inTransaction;
    },
    close: () => void database.close(),
  };
}

function withStatementCache(
  connection: SqliteConnectionHandle,
  capacity: number,
  guard: StatementGuard | undefined,
): SqliteConnectionHandle {
  const statements = new Map<string, SqliteStatement>();
  return {
    prepare(sql) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = guard === undefined ? connection.prepare(sql) : guarded(connection, sql, guard);
        if (statements.size >= capacity) statements.delete(statements.keys().next().value as string);
        statements.set(sql, statement);
      }
      return statement;
    },
    get inTransaction() {
      return connection.inTransaction;
    },
    close: () => connection.close(),
  };
}

function guarded(connection: SqliteConnectionHandle, sql: string, guard: StatementGuard): SqliteStatement {
  const watch = <T>(run: () => T): T => {
    guard.before?.(sql);
    try {
      return run();
    } catch (error) {
      guard.failed?.(error);
      throw error;
    }
  };
  const statement = watch(() => connection.prepare(sql));
  return {
    reader: statement.reader,
    all: (parameters) => watch(() => statement.all(parameters)),
    run: (parameters) => watch(() => statement.run(parameters)),
  };
}
