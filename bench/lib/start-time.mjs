// How long `npm start` takes to answer: the Quick start's own command, as a user runs it on a
// checkout whose build is current, with its defaults (one worker process per core) on a database
// that exists, from the command to the first 200 of GET /health/ready. Each run is bounded in time.
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { ROOT } from './processes.mjs';

export const START_GOAL_S = 3;
const RUNS = 3;
const WAIT_MS = 30_000;

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The status of GET /health/ready, or 0 when nothing answers yet. */
function readiness(port) {
  return new Promise((resolve) => {
    const request = get({ host: '127.0.0.1', port, path: '/health/ready', agent: false }, (reply) => {
      reply.resume();
      resolve(reply.statusCode);
    });
    request.on('error', () => resolve(0));
    request.setTimeout(1000, () => request.destroy());
  });
}

/**
 * Seconds from `npm start` to ready, for each of RUNS starts on the SQLite file `data`; a first start,
 * not counted, creates and migrates it.
 */
export async function measureStart(data) {
  const env = { ...process.env, ROWI_HOST: '127.0.0.1', ROWI_DATA: data };
  // Its defaults: one worker a core, SQLite.
  delete env.ROWI_WORKERS;
  delete env.ROWI_DATABASE_URL;
  const seconds = [];
  for (let run = -1; run < RUNS; run += 1) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const started = performance.now();
    const child = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      detached: true,
      stdio: 'ignore',
      env: { ...env, ROWI_PORT: String(port) },
    });
    try {
      let ready;
      while (ready === undefined && performance.now() - started < WAIT_MS) {
        if ((await readiness(port)) === 200) ready = (performance.now() - started) / 1000;
        else await pause(20);
      }
      if (run >= 0) seconds.push(ready ?? Infinity);
    } finally {
      // npm, the primary and its workers: the whole group.
      process.kill(-child.pid, 'SIGTERM');
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve()));
      await pause(500);
    }
  }
  return { seconds, median: [...seconds].sort((a, b) => a - b)[Math.floor(RUNS / 2)] };
}

export function startGoalLine(start) {
  return {
    verdict: start.median <= START_GOAL_S ? '✓' : '✗',
    label: '`npm start` (build current, one worker a core, a database that exists) to GET /health/ready 200',
    goal: `≤ ${START_GOAL_S} s`,
    figure: `${start.median.toFixed(2)} s (median of ${start.seconds.map((value) => value.toFixed(2)).join(', ')})`,
  };
}
