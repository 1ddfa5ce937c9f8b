import { execute, openSqliteConnection } from '../../src/db/sqlite-connection.js';

/**
 * A connection of a test's own to a SQLite file, with whichever driver this Node.js has (as rowi
 * itself opens it): to read what a server stored, or to hold the write lock against it.
 */
export interface SqliteFile {
  exec(sql: string): void;
  all<T = Record<string, unknown>>(sql: string, ...parameters: unknown[]): T[];
  get<T = Record<string, unknown>>(sql: string, ...parameters: unknown[]): T | undefined;
  readonly inTransaction: boolean;
  close(): void;
}

export async function openSqliteFile(file: string, options: { busyTimeoutMs?: number } = {}): Promise<SqliteFile> {
  const connection = await openSqliteConnection(file, {
    synchronous: 'full',
    busyTimeoutMs: options.busyTimeoutMs ?? 5000,
  });
  // Rows of node:sqlite have no prototype; tests compare them with plain objects.
  const plain = <T>(rows: unknown[]) => rows.map((row) => ({ ...(row as object) })) as T[];
  return {
    exec: (sql) => void execute(connection.prepare(sql)),
    all: <T>(sql: string, ...parameters: unknown[]) => plain<T>(connection.prepare(sql).all(parameters)),
    get: <T>(sql: string, ...parameters: unknown[]) => plain<T>(connection.prepare(sql).all(parameters))[0],
    get inTransaction() {
      return connection.inTransaction;
    },
    close: () => connection.close(),
  };
}
