// @ts-check
/**
 * SQLite's own check of a database file, in a process of its own (started by sqlite-check.ts): it
 * reads every page of every table and index, seconds a gigabyte, which the thread that answers
 * requests must not wait for. Not a worker thread: SQLite's check cannot be interrupted, and a
 * process waits for its threads to finish before it exits, so a rowi told to stop would wait for
 * the check; a child process is killed instead. Plain JavaScript for the reason
 * checkpoint-worker.js gives.
 *
 * Argument: JSON { file, pragma: 'quick_check' | 'integrity_check', limit }.
 * Message out, once: { problems } (empty when the file is sound; SQLite's lines, each naming the
 * table or index of the tree it is in where SQLite says which), or { error } when the check could
 * not run for another reason than damage (the file locked, unreadable).
 */
import { openPlainConnection } from './sqlite-plain.js';

/** @type {{ file: string; pragma: 'quick_check' | 'integrity_check'; limit: number }} */
const { file, pragma, limit } = JSON.parse(process.argv[2] ?? '{}');
/** @param {{ problems: string[] } | { error: string }} message */
const answer = (message) => process.send?.(message, () => process.disconnect());

try {
  const connection = await openPlainConnection(file, ['busy_timeout = 10000']);
  try {
    answer({ problems: check(connection) });
  } finally {
    connection.close();
  }
} catch (error) {
  // Damage SQLite meets before the check can say anything (a header that is not SQLite's) is damage too.
  answer(isDamage(error) ? { problems: [message(error)] } : { error: message(error) });
}

/**
 * The check's lines: one row 'ok', or rows (in some versions one row of lines) of what is wrong,
 * at most `limit`. The check itself may stop at damage it cannot step over (quick_check reads
 * tables through to test their NOT NULL columns): its error is the last line.
 * @param {{ all(sql: string): Record<string, unknown>[]; iterate(sql: string): Iterable<Record<string, unknown>> }} connection
 */
function check(connection) {
  /** @type {string[]} */
  const lines = [];
  try {
    for (const row of connection.iterate(`pragma ${pragma}(${limit})`))
      lines.push(...String(Object.values(row)[0]).split('\n'));
  } catch (error) {
    if (!isDamage(error)) throw error;
    lines.push(`${message(error)} (where the check stopped)`);
  }
  const problems = lines.filter((line) => line !== 'ok' && !line.startsWith('*** in database'));
  return problems.length === 0 ? [] : named(problems, connection);
}

/** SQLITE_CORRUPT (and its extended codes) or SQLITE_NOTADB, from either driver. */
function isDamage(/** @type {unknown} */ error) {
  const { code, errcode } = /** @type {{ code?: unknown; errcode?: unknown }} */ (error);
  if (typeof errcode === 'number') return (errcode & 0xff) === 11 || (errcode & 0xff) === 26;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB');
}

function message(/** @type {unknown} */ error) {
  return error instanceof Error ? error.message : String(error);
}

/**
 * SQLite names a tree by its root page ("Tree 6 page 87 cell 3: …"); the schema says whose it is,
 * unless the schema's own page is what is damaged.
 * @param {string[]} problems
 * @param {{ all(sql: string): Record<string, unknown>[] }} connection
 */
function named(problems, connection) {
  /** @type {Map<number, string>} */
  const trees = new Map();
  try {
    for (const row of connection.all('select name, rootpage from sqlite_schema'))
      trees.set(Number(row.rootpage), String(row.name));
  } catch {
    // The schema cannot be read: the lines stay as SQLite wrote them.
  }
  return problems.map((line) => {
    const tree = /^Tree (\d+) /.exec(line);
    const name = tree === null ? undefined : trees.get(Number(tree[1]));
    return name === undefined ? line : `${name}: ${line}`;
  });
}
