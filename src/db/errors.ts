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
  const { code, message, table, detail } = error as Record<string, unknown>;
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
