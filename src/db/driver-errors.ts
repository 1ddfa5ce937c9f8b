/**
 * Recognises database errors by meaning rather than by driver, so services stay portable
 * between SQLite (better-sqlite3) and PostgreSQL (pg).
 *
 * `column` ("users.email_key") narrows the check to one unique key: SQLite names it in the
 * message ("UNIQUE constraint failed: users.email_key"), PostgreSQL in `table` and `detail`
 * ("Key (email_key)=(…) already exists.", "Key (scope, key)=(…)").
 */
export function isUniqueViolation(error: unknown, column?: string): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { message, table, detail } = error as Record<string, unknown>;
  const code = codeOf(error);
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return column === undefined || String(message).includes(column);
  }
  if (code === '23505') {
    if (column === undefined) return true;
    const [tableName, columnName] = column.split('.');
    return table === tableName && new RegExp(`[(\\s]${columnName}[,)]`).test(String(detail));
  }
  return false;
}

/** Network errors of a connection to PostgreSQL that is refused, reset or cannot be resolved. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * PostgreSQL SQLSTATEs after which the same request may well succeed a moment later:
 * connection exceptions (08…), the server shutting down or starting (57P01–57P03), too many
 * connections (53300), a statement that ran past statement_timeout (57014), and a transaction
 * rolled back by deadlock detection or serialization (40P01, 40001). The transaction was rolled
 * back in every case, so nothing is half-written and a retry is safe.
 */
const TRANSIENT_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '57014', '40P01', '40001', '55P03']);

/** pg's own messages for a pool that had no connection to give in time, or a connection that died. */
const TRANSIENT_MESSAGES =
  /^(timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|Connection terminated due to connection timeout)/;

/**
 * True when the database could not take the request now (unreachable, restarting, too busy,
 * past a time limit): answered with 503 and Retry-After rather than 500, since retrying is the
 * right thing for the caller to do. SQLite's SQLITE_BUSY (the write lock not granted within the
 * busy timeout) is the same kind of failure.
 */
export function isUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { message } = error as Record<string, unknown>;
  const code = codeOf(error);
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || TRANSIENT_SQLSTATES.has(code) || code.startsWith('08')) return true;
    if (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_')) return true;
  }
  return typeof message === 'string' && TRANSIENT_MESSAGES.test(message);
}

/** Server states in which PostgreSQL takes no connection: shutting down, crashed, starting, too many connections. */
const UNREACHABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * The database cannot be reached at all, as opposed to refusing one transaction: the network to
 * it refused, reset or cut, its server shutting down or starting, no connection to be had in time.
 * A subset of isUnavailable (a deadlock or a statement past its time is one request's bad luck),
 * logged as an outage (outage.ts) rather than per request.
 */
export function isUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = codeOf(error);
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNREACHABLE_SQLSTATES.has(code) || code.startsWith('08')))
    return true;
  const { message } = error as Record<string, unknown>;
  return typeof message === 'string' && TRANSIENT_MESSAGES.test(message);
}

/**
 * A foreign key refused the write: the record referred to was deleted by a transaction that
 * committed while this one ran (PostgreSQL runs them side by side; on SQLite a transaction that
 * checks first holds the write lock, so this does not happen there).
 */
export function isForeignKeyViolation(error: unknown): boolean {
  const code = codeOf(error);
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/**
 * The database refused the values a statement wrote, not the statement or itself: PostgreSQL's
 * data exceptions (class 22: a NUL in text, a string too long, a number out of range), integrity
 * constraints (23) and program limits (54: a row too large); SQLite's constraints (a trigger's
 * RAISE included), a string or blob too big, a datatype mismatch. The same statement with other
 * values may well succeed, so a batch that fails this way is worth splitting to find the row at
 * fault; a database that is unreachable, full or damaged fails every row alike.
 */
export function isRefusedValue(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) return false;
  if (/^(22|23|54)[0-9A-Z]{3}$/.test(code)) return true;
  return code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_TOOBIG' || code === 'SQLITE_MISMATCH';
}

/**
 * The database has no room for the write: SQLite's SQLITE_FULL (the file system said ENOSPC, or
 * the file reached its size limit) or PostgreSQL's disk_full (53100). Answered 507 with
 * Retry-After: the transaction was rolled back, nothing is half-written, and the same write
 * succeeds once space is freed.
 */
export function isDiskFull(error: unknown): boolean {
  const code = codeOf(error);
  return code === 'SQLITE_FULL' || code === '53100';
}

/** The code of rowi's own refusal of a write to a database known to be damaged (corruption.ts). */
export const STORAGE_CORRUPT_CODE = 'ROWI_STORAGE_CORRUPT';

/**
 * The database is damaged: SQLite's SQLITE_CORRUPT ("database disk image is malformed": a page is
 * not what its tree says it should be) or SQLITE_NOTADB (the file's header is not SQLite's),
 * PostgreSQL's data_corrupted (XX001: a block that cannot be read) or index_corrupted (XX002); or
 * rowi's refusal of a write after one of those. Answered 503 `storage-corrupt`, never retried.
 */
export function isCorruption(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) return false;
  return (
    code.startsWith('SQLITE_CORRUPT') ||
    code === 'SQLITE_NOTADB' ||
    code === 'XX001' ||
    code === 'XX002' ||
    code === STORAGE_CORRUPT_CODE
  );
}

/**
 * The error's code: PostgreSQL's SQLSTATE, a network error's, or SQLite's name for it (SQLITE_BUSY,
 * SQLITE_CONSTRAINT_UNIQUE…), which better-sqlite3 gives as `code` and node:sqlite as a number
 * (`errcode`: the primary code in the low byte, the extended one whole).
 */
export function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, errcode } = error as Record<string, unknown>;
  if (code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number')
    return SQLITE_CODES[errcode] ?? SQLITE_CODES[errcode & 0xff] ?? `SQLITE_${errcode}`;
  return typeof code === 'string' ? code : undefined;
}

/** The SQLite result codes rowi tells apart (sqlite.org/rescode.html), extended ones first. */
const SQLITE_CODES: Record<number, string> = {
  2067: 'SQLITE_CONSTRAINT_UNIQUE',
  1555: 'SQLITE_CONSTRAINT_PRIMARYKEY',
  787: 'SQLITE_CONSTRAINT_FOREIGNKEY',
  275: 'SQLITE_CONSTRAINT_CHECK',
  261: 'SQLITE_BUSY_RECOVERY',
  517: 'SQLITE_BUSY_SNAPSHOT',
  773: 'SQLITE_BUSY_TIMEOUT',
  5: 'SQLITE_BUSY',
  6: 'SQLITE_LOCKED',
  10: 'SQLITE_IOERR',
  11: 'SQLITE_CORRUPT',
  13: 'SQLITE_FULL',
  18: 'SQLITE_TOOBIG',
  19: 'SQLITE_CONSTRAINT',
  20: 'SQLITE_MISMATCH',
  26: 'SQLITE_NOTADB',
};
