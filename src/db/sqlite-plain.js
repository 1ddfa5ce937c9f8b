// @ts-check
/**
 * A SQLite connection for code that runs beside the main thread (checkpoint-worker.js on a thread,
 * sqlite-check-child.js in a process of its own), with node:sqlite where Node has it, else
 * better-sqlite3, as sqlite-connection.ts opens them on the main thread. Plain JavaScript,
 * type-checked through JSDoc, for the reason checkpoint-worker.js gives: such code runs a file as
 * Node finds it, from dist/ and under the test runner alike.
 */

/**
 * @typedef {(progress: { totalPages: number; remainingPages: number }) => void} BackupStep
 *   called after each step of a backup (its pages copied), before the next one starts
 */

/**
 * @param {string} file
 * @param {string[]} pragmas set on the connection as it opens
 * @returns {Promise<{ all(sql: string): Record<string, unknown>[]; iterate(sql: string): Iterable<Record<string, unknown>>; exec(sql: string): void; backup: ((destination: string, pages: number, step: BackupStep) => Promise<void>) | undefined; close(): void }>}
 *   `all` runs a statement that returns rows, each prepared once; `iterate` steps through its rows, one at a time;
 *   `exec` runs statements that return none; `backup` copies the database into the new file `destination`
 *   with SQLite's online backup API, `pages` at a step, `step` called after each (undefined on a Node
 *   whose node:sqlite has no backup, before 22.16)
 */
export async function openPlainConnection(file, pragmas) {
  /** @type {{ exec(sql: string): void; prepare(sql: string): { all(): Record<string, unknown>[]; iterate(): Iterable<Record<string, unknown>> }; close(): void }} */
  let database;
  /** @type {((destination: string, pages: number, step: BackupStep) => Promise<void>) | undefined} */
  let backup;
  try {
    // A string the type checker does not resolve: node:sqlite's types are not in @types/node 20.
    const sqlite = /** @type {any} */ (await import(/** @type {string} */ ('node:sqlite')));
    database = new sqlite.DatabaseSync(file);
    if (typeof sqlite.backup === 'function')
      backup = async (destination, pages, step) =>
        void (await sqlite.backup(database, destination, { rate: pages, progress: step }));
  } catch (error) {
    if (/** @type {{ code?: string }} */ (error).code !== 'ERR_UNKNOWN_BUILTIN_MODULE') throw error;
    const { default: Database } = await import('better-sqlite3');
    const opened = new Database(file, { fileMustExist: true });
    database = /** @type {any} */ (opened);
    backup = async (destination, pages, step) =>
      void (await opened.backup(destination, {
        progress: (progress) => {
          step(progress);
          return pages;
        },
      }));
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
    backup,
    close: () => void database.close(),
  };
}
