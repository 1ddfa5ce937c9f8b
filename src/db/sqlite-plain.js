// @ts-check
/**
 * A SQLite connection for code that runs beside the main thread (checkpoint-worker.js on a thread,
 * sqlite-check-child.js in a process of its own), with node:sqlite where Node has it, else
 * better-sqlite3, as sqlite-connection.ts opens them on the main thread. Plain JavaScript,
 * type-checked through JSDoc, for the reason checkpoint-worker.js gives: such code runs a file as
 * Node finds it, from dist/ and under the test runner alike.
 */

/**
 * @param {string} file
 * @param {string[]} pragmas set on the connection as it opens
 * @returns {Promise<{ all(sql: string): Record<string, unknown>[]; iterate(sql: string): Iterable<Record<string, unknown>>; exec(sql: string): void; close(): void }>}
 *   `all` runs a statement that returns rows, each prepared once; `iterate` steps through its rows, one at a time;
 *   `exec` runs statements that return none
 */
export async function openPlainConnection(file, pragmas) {
  /** @type {{ exec(sql: string): void; prepare(sql: string): { all(): Record<string, unknown>[]; iterate(): Iterable<Record<string, unknown>> }; close(): void }} */
  let database;
  try {
    // A string the type checker does not resolve: node:sqlite's types are not in @types/node 20.
    const { DatabaseSync } = /** @type {any} */ (await import(/** @type {string} */ ('node:sqlite')));
    database = new DatabaseSync(file);
  } catch (error) {
    if (/** @type {{ code?: string }} */ (error).code !== 'ERR_UNKNOWN_BUILTIN_MODULE') throw error;
    const { default: Database } = await import('better-sqlite3');
    database = /** @type {any} */ (new Database(file, { fileMustExist: true }));
  }
  /** @type {Map<string, { all(): Record<string, unknown>[]; iterate(): Iterable<Record<string, unknown>> }>} */
  const statements = new Map();
  const prepared = (/** @type {string} */ sql) => {
    let statement = statements.get(sql);
    if (statement === undefined) statements.set(sql, (statement = database.prepare(sql)));
    return statement;
  };
  for (const pragma of pragmas) database.exec(`pragma ${pragma}`);
  return {
    all: (sql) => prepared(sql).all(),
    iterate: (sql) => prepared(sql).iterate(),
    exec: (sql) => database.exec(sql),
    close: () => void database.close(),
  };
}
