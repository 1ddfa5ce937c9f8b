import { fork } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { repairAdvice } from './corruption.js';

/** Lines of SQLite's check kept at most: enough to say what is damaged, not a page of them. */
const PROBLEMS_LISTED = 10;

type CheckOutcome = { problems: string[]; ms: number } | { error: string; ms: number };

/** Whether the SQLite file holds anything to check: decided before rowi opens it, which makes a new one. */
export const holdsData = (file: string): boolean => existsSync(file) && statSync(file).size > 0;

/**
 * Checks the SQLite file for damage before rowi writes to it (ROWI_SQLITE_CHECK: `quick` runs
 * SQLite's quick_check, `full` its integrity_check, `off` nothing), in a process of its own
 * (sqlite-check-child.js). The start waits for it up to ROWI_SQLITE_CHECK_WAIT: damage found by
 * then stops rowi with ConfigError (exit code 2) saying what is damaged and what to do. A check
 * still running then goes on beside rowi, and `onLateDamage` hears what it finds (a running rowi
 * treats it as damage a request met: db/corruption.ts). A new file, PostgreSQL and `:memory:`
 * have nothing to check.
 */
export async function checkSqliteFile(
  config: Config,
  log: FastifyBaseLogger,
  onLateDamage: (detail: string) => void,
): Promise<Promise<void> | undefined> {
  const file = config.data;
  if (config.databaseUrl !== '' || config.sqliteCheck === 'off' || file === ':memory:' || !holdsData(file))
    return undefined;
  const pragma = config.sqliteCheck === 'full' ? 'integrity_check' : 'quick_check';
  const outcome = runCheck(file, pragma);
  let timer: NodeJS.Timeout | undefined;
  const waited = await Promise.race([
    outcome,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), config.sqliteCheckWait))),
  ]);
  clearTimeout(timer);
  if (waited !== undefined && 'error' in waited) {
    log.warn(
      { file, check: pragma, err: waited.error },
      `SQLite's ${pragma} of ${file} could not run (${waited.error}): rowi starts without it`,
    );
    return undefined;
  }
  if (waited !== undefined) {
    const damage = describeDamage(waited, pragma);
    if (damage !== undefined) {
      throw new ConfigError(
        `ROWI_DATA=${JSON.stringify(file)} is damaged: ${damage.summary}:\n  ${damage.lines.join('\n  ')}\n` +
          `rowi did not start, and wrote nothing new to it. ${repairAdvice('sqlite', file)}\n` +
          'ROWI_SQLITE_CHECK=off starts without this check (the damage stays; requests that meet it get 503).',
      );
    }
    log.info({ file, check: pragma, ms: waited.ms }, `${file} has no damage SQLite's ${pragma} finds`);
    return undefined;
  }
  log.info(
    { file, check: pragma, wait_ms: config.sqliteCheckWait },
    `SQLite's ${pragma} of ${file} has not finished within ROWI_SQLITE_CHECK_WAIT: rowi starts, and the check goes on beside it`,
  );
  // Settles when the check ends (what waits for it: process/serve.ts, the preparer of --workers).
  return outcome.then((late) => {
    const damage = describeDamage(late, pragma);
    if ('error' in late)
      log.warn(
        { file, check: pragma, err: late.error },
        `SQLite's ${pragma} of ${file} could not finish (${late.error})`,
      );
    else if (damage === undefined)
      log.info({ file, check: pragma, ms: late.ms }, `${file} has no damage SQLite's ${pragma} finds`);
    else onLateDamage(`${damage.summary}: ${damage.lines.join('; ')}`);
  });
}

function runCheck(file: string, pragma: 'quick_check' | 'integrity_check'): Promise<CheckOutcome> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    const child = fork(
      fileURLToPath(new URL('./sqlite-check-child.js', import.meta.url)),
      [JSON.stringify({ file, pragma, limit: PROBLEMS_LISTED })],
      {
        execArgv: [],
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      },
    );
    // rowi does not wait for a check still running when it stops: the check ends with it.
    const stop = () => child.kill('SIGKILL');
    process.once('exit', stop);
    child.unref();
    child.channel?.unref();
    child.once('message', (message: { problems: string[] } | { error: string }) => resolve({ ...message, ms: ms() }));
    child.once('error', (error) => resolve({ error: error.message, ms: ms() }));
    child.once('exit', (code, signal) => {
      process.off('exit', stop);
      resolve({
        error: `the check ended without an answer (exit code ${code}${signal ? `, ${signal}` : ''})`,
        ms: ms(),
      });
    });
  });
}

/** What is damaged: a summary and SQLite's own lines; undefined when nothing is. */
function describeDamage(outcome: CheckOutcome, pragma: string): { summary: string; lines: string[] } | undefined {
  if ('error' in outcome || outcome.problems.length === 0) return undefined;
  const more = outcome.problems.length >= PROBLEMS_LISTED ? `, the first ${PROBLEMS_LISTED} of its lines` : '';
  return { summary: `SQLite's ${pragma} found damage${more}`, lines: outcome.problems };
}
