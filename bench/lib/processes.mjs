// The bench's servers are child processes of the run. Each logs to a file in the run's work folder
// (as rowi logs in production), and each is recorded in bench.children so that stopServers can end
// them all, cluster workers included, however the run ends.
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, readdirSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
/**
 * The CLI of a build's dist/ folder: the bundle that `npm start` runs (dist/rowi/cli.js), or, in a
 * build from before the bundle, the compiled modules' (dist/src/process/cli.js).
 */
export function cliOf(dist) {
  const bundled = join(dist, 'rowi/cli.js');
  return existsSync(bundled) ? bundled : join(dist, 'src/process/cli.js');
}
const SERVE = [cliOf(join(ROOT, 'dist')), 'serve'];
const LISTENING = /"msg":"listening on (http:\/\/[^"\s]+)\/v1/;

// Preloaded into every rowi process (workers inherit it): the event loop's delay during each load.
const LOOP_DELAY = join(ROOT, 'bench/lib/loop-delay.mjs');
/** The V8 options rowi is started with by `npm start` and the Dockerfile (package.json's "start"). */
const V8_OPTIONS =
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start.match(/--max-semi-space-size=\d+/g) ?? [];

/**
 * `rowi serve` (or another program that logs "listening on" as rowi does) with these settings,
 * under this Node.js (`node`: another binary than the bench's own, e.g. Node 24 for node:sqlite).
 */
export async function startRowi(bench, name, env, args = SERVE, node = process.execPath) {
  const preload = `--import ${pathToFileURL(LOOP_DELAY).href}`;
  const options = [...V8_OPTIONS, process.env.NODE_OPTIONS, preload].filter(Boolean).join(' ');
  const server = await startProcess(bench, name, args, { ...env, NODE_OPTIONS: options }, LISTENING, node);
  server.loopDelay = true;
  // Idle: started, serving, nothing loaded yet (a second to settle after untilServing's requests).
  await pause(1000);
  const workers = descendantsOf(server.child.pid);
  server.idleRssMb = rssMbOf([server.child.pid, ...workers]);
  if (workers.length > 0) server.primaryIdleRssMb = rssMbOf([server.child.pid]);
  return server;
}

/** The resident memory of these processes together, in MB, from /proc (a process that ended counts 0). */
export function rssMbOf(pids) {
  let kb = 0;
  for (const pid of pids) {
    try {
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (rss) kb += Number(rss[1]);
    } catch {
      // It ended.
    }
  }
  return kb / 1024;
}

/**
 * Starts a server process whose log goes to a file (as in production) and waits for its URL. A
 * variable given as '' is left out of its environment: that unsets one the bench inherited (rowi
 * refuses an empty setting).
 */
export async function startProcess(bench, name, args, env, listening, node = process.execPath) {
  const logFile = join(bench.work, `${name}.log`);
  const errFile = join(bench.work, `${name}.stderr`);
  const environment = Object.fromEntries(
    Object.entries({ ...process.env, ...env }).filter(([, value]) => value !== ''),
  );
  const child = spawn(node, args, {
    env: environment,
    stdio: ['ignore', openSync(logFile, 'w'), openSync(errFile, 'w')],
  });
  bench.children.add(child);
  for (let waited = 0; waited < 20_000; waited += 50) {
    const match = listening.exec(readFileSync(logFile, 'utf8'));
    if (match) {
      const server = { name, child, logFile, errFile, url: match[1], node };
      await untilServing(server);
      return server;
    }
    if (child.exitCode !== null) break;
    await pause(50);
  }
  throw new Error(`${name} did not start:\n${readFileSync(logFile, 'utf8')}${readFileSync(errFile, 'utf8')}`);
}

/**
 * Waits (at most 15 s) until a server just started stops shedding load: rowi may answer 503 for up
 * to a second after it listens (each worker process's first lag sample can span its start-up),
 * which setting up must not meet. Served (any other status than 503, the baseline's 404 included)
 * for 1.2 s in a row, on a new connection each time so that every worker process is asked.
 */
async function untilServing(server) {
  const statusOf = () =>
    new Promise((resolve, reject) => {
      const request = httpGet(`${server.url}/v1/limits`, { agent: false, timeout: 5000 }, (reply) => {
        reply.resume();
        reply.on('end', () => resolve(reply.statusCode));
      });
      request.on('timeout', () => request.destroy(new Error('no answer within 5 s')));
      request.on('error', reject);
    });
  let since = Date.now();
  for (const started = Date.now(); Date.now() - started < 15_000;) {
    if ((await statusOf()) === 503) since = Date.now();
    else if (Date.now() - since >= 1200) return;
    await pause(50);
  }
  throw new Error(`${server.name} still sheds load (503) 15 s after it started`);
}

/** The first admin's key, from the banner rowi prints on stderr once it listens on an empty database. */
export async function adminKeyOf(server) {
  for (let waited = 0; waited < 5000; waited += 50) {
    const match = /^ {2}ROWI_KEY=(rowi_\S+)$/m.exec(readFileSync(server.errFile, 'utf8'));
    if (match) return match[1];
    await pause(50);
  }
  throw new Error(
    `${server.name} printed no ROWI_KEY= on stderr (was its database empty?):\n${readFileSync(server.errFile, 'utf8')}`,
  );
}

/** The processes under pid (a cluster primary's workers), from /proc. */
export function descendantsOf(pid) {
  const parents = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after "(comm)": state, ppid, …
      parents.push([Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])]);
    } catch {
      // It ended while listed.
    }
  }
  const found = [];
  for (let level = [pid]; level.length > 0;) {
    level = parents.filter(([, parent]) => level.includes(parent)).map(([child]) => child);
    found.push(...level);
  }
  return found;
}

/** Whether a process still runs (a zombie does not). */
function running(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/** Kills every server and its worker processes (the primary first, so it forks no replacement), and waits until they are gone. */
export async function stopServers(bench) {
  const pids = [];
  for (const child of bench.children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const workers = descendantsOf(child.pid);
    child.kill('SIGKILL');
    for (const pid of workers) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    pids.push(child.pid, ...workers);
  }
  for (let waited = 0; waited < 5000 && pids.some(running); waited += 50) await pause(50);
}

function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
