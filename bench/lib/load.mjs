// Loading one target over loopback: wrk when installed (else autocannon), with bench.connections
// connections and bench.threads wrk threads. Every load is bounded in time, and any non-2xx
// answer or socket error fails the run: a refusal measured would not be the operation.
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { orderBodies, orderScript } from './order-mix.mjs';
import { descendantsOf, rssMbOf } from './processes.mjs';

export function findLoadTool() {
  const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
  if (has('wrk')) return 'wrk';
  console.log('wrk not found; trying apt-get install wrk …');
  spawnSync(
    'sh',
    [
      '-c',
      'DEBIAN_FRONTEND=noninteractive apt-get install -y wrk || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk)',
    ],
    { stdio: 'ignore', timeout: 180_000 },
  );
  if (has('wrk')) return 'wrk';
  console.log('wrk unavailable; falling back to autocannon');
  return 'autocannon';
}

/** One load of a target, unmeasured but for the load tool's figures (the warm-up). */
export async function load(bench, tool, target, seconds) {
  // Where this load's lines start in the server's log: if it fails, the log tells which statuses.
  const logStart = statSync(target.server.logFile).size;
  const request = { ...target, headers: { ...target.headers, ...(await target.credentials?.()) } };
  try {
    return await (tool === 'wrk' ? runWrk(bench, request, seconds) : runAutocannon(bench, request, seconds));
  } catch (error) {
    error.message += loggedStatuses(target.server, logStart);
    throw error;
  }
}

/** The non-2xx statuses in rowi's access log since offset (the baseline logs none), e.g. 409 ×12. */
function loggedStatuses(server, offset) {
  const counts = new Map();
  for (const [, status] of readFileSync(server.logFile)
    .subarray(offset)
    .toString('utf8')
    .matchAll(/"status":(\d+)/g)) {
    if (!status.startsWith('2')) counts.set(status, (counts.get(status) ?? 0) + 1);
  }
  return counts.size === 0
    ? ''
    : `\n${server.name} logged: ${[...counts].map(([status, count]) => `${status} ×${count}`).join(', ')}`;
}

/**
 * One measured run, with the server's peak RSS sampled while it is under load: with worker
 * processes, the sum over the primary and its workers (listed once, as the load starts); and the
 * event loop's delay p99 the server saw meanwhile (the worst of its processes), from the
 * histogram bench/lib/loop-delay.mjs keeps in every rowi (null for the baseline, which has none).
 * `alongside`: another target loaded at the same time (its figures are returned as `alongsideFigures`).
 */
/**
 * A load alongside starts this long after the main one and ends as long before it: it measures
 * the main load's steady state, not its 64 connections opening at once (a read sent in that
 * burst waited 100–250 ms here) nor its end.
 */
const ALONGSIDE_LEAD_S = 1;

export async function measure(bench, tool, target, seconds, alongside) {
  const pids = [target.server.child.pid, ...descendantsOf(target.server.child.pid)];
  // A backup's copy (a process of its own, db/backup-child.js) serves nothing: its CPU counts in
  // cpuMs, but it has no loop delay to report and its main thread is not one that answers.
  const serving = pids.filter((pid) => !commandOf(pid).includes('backup-child'));
  const delay = await loopDelayOf(target.server, serving, () =>
    cpuOf(pids, serving, target.storage === 'PostgreSQL', async () => {
      const [main, other] = await Promise.all([
        rssWhile(pids, () => load(bench, tool, target, seconds)),
        alongside &&
          pause(ALONGSIDE_LEAD_S * 1000).then(() =>
            load(bench, tool, alongside, Math.max(1, seconds - 2 * ALONGSIDE_LEAD_S)),
          ),
      ]);
      return { ...main, ...(other ? { alongsideFigures: other } : {}) };
    }),
  );
  return delay;
}

// Clock ticks a second of /proc/<pid>/stat's utime and stime (100 on Linux, asked once).
let ticksPerSecond;

/**
 * Runs `work` and adds the CPU the server's processes spent meanwhile, from /proc: `cpuMs`, their
 * CPU milliseconds per request answered (every thread, the checkpoint thread included), and
 * `mainBusy`, the CPU time of the busiest main thread among the `serving` processes over the
 * wall time (1 = a core all the time). A main thread near 1 is the ceiling of that process:
 * JavaScript runs there and nowhere else.
 */
async function cpuOf(pids, serving, postgres, work) {
  ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  const before = pids.map(cpuTicksOf);
  const postgresBefore = postgres && postgresTicks();
  const started = process.hrtime.bigint();
  const result = await work();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = pids.map(cpuTicksOf);
  const postgresBusy = postgres ? { postgresBusy: (postgresTicks() - postgresBefore) / ticksPerSecond / seconds } : {};
  const spent = (key) => after.map((ticks, index) => (ticks && before[index] ? ticks[key] - before[index][key] : 0));
  const requests = result.requests + (result.alongsideFigures?.requests ?? 0);
  const processMs = (spent('process').reduce((sum, ticks) => sum + ticks, 0) * 1000) / ticksPerSecond;
  return {
    ...result,
    cpuMs: processMs / requests,
    mainBusy: Math.max(...spent('main').filter((_, index) => serving.includes(pids[index]))) / ticksPerSecond / seconds,
    ...postgresBusy,
  };
}

/** CPU ticks of every PostgreSQL process of this machine (0 when the bench's PostgreSQL runs elsewhere). */
function postgresTicks() {
  const pids = spawnSync('pgrep', ['-x', 'postgres'], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  return pids.reduce((sum, pid) => {
    const ticks = cpuTicksOf(Number(pid));
    return sum + (ticks?.process ?? 0);
  }, 0);
}

/** A process's command line ('' for one that ended). */
function commandOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** utime + stime of a process and of its main thread, in clock ticks; null for a process that ended. */
function cpuTicksOf(pid) {
  const ticks = (file) => {
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const stat = readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  try {
    return { process: ticks(`/proc/${pid}/stat`), main: ticks(`/proc/${pid}/task/${pid}/stat`) };
  } catch {
    return null;
  }
}

/**
 * Runs `work` between two SIGWINCH to the server's processes: the first starts each one's
 * loop-delay histogram afresh, the second has each write it to stderr; the worst p99 and max of
 * them are added to what `work` returns.
 */
async function loopDelayOf(server, pids, work) {
  if (!isRowi(server)) return { ...(await work()), loopP99: null, loopMax: null };
  const signal = () => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGWINCH');
      } catch {
        // A worker that ended.
      }
    }
  };
  signal();
  await pause(50);
  const offset = statSync(server.errFile).size;
  const result = await work();
  signal();
  let seen = [];
  for (let waited = 0; waited < 2000 && seen.length < pids.length; waited += 50) {
    await pause(50);
    seen = readFileSync(server.errFile)
      .subarray(offset)
      .toString('utf8')
      .split('\n')
      .filter((line) => line.startsWith('{"loop_delay_ms"'))
      .map((line) => JSON.parse(line).loop_delay_ms);
  }
  if (seen.length === 0) return { ...result, loopP99: null, loopMax: null };
  return {
    ...result,
    loopP99: Math.max(...seen.map((delay) => delay.p99)),
    loopMax: Math.max(...seen.map((delay) => delay.max)),
  };
}

/** A rowi (its processes keep the loop-delay histogram), not the baseline. */
function isRowi(server) {
  return server.loopDelay === true;
}

function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function rssWhile(pids, work) {
  let peak = 0;
  // With worker processes, the primary's own peak too (pids[0]; it serves nothing itself).
  let primaryPeak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMbOf(pids));
    if (pids.length > 1) primaryPeak = Math.max(primaryPeak, rssMbOf([pids[0]]));
  }, 100);
  try {
    return { ...(await work()), rssMb: peak, ...(pids.length > 1 ? { primaryRssMb: primaryPeak } : {}) };
  } finally {
    clearInterval(sampler);
  }
}

/** The median of each figure over runs (each sorted on its own), the peak RSS and the worst loop delay of them all. */
export function median(runs) {
  const pick = (key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
  const worst = (key) =>
    runs.some((run) => run[key] === null || run[key] === undefined) ? null : Math.max(...runs.map((run) => run[key]));
  const alongside = runs.every((run) => run.alongsideFigures)
    ? median(runs.map((run) => ({ ...run.alongsideFigures, rssMb: 0 })))
    : undefined;
  const optional = (key) => (runs.every((run) => typeof run[key] === 'number') ? { [key]: pick(key) } : {});
  return {
    rps: pick('rps'),
    p50: pick('p50'),
    p99: pick('p99'),
    rssMb: Math.max(...runs.map((run) => run.rssMb)),
    ...(runs.every((run) => run.primaryRssMb !== undefined)
      ? { primaryRssMb: Math.max(...runs.map((run) => run.primaryRssMb)) }
      : {}),
    loopP99: worst('loopP99'),
    loopMax: worst('loopMax'),
    ...optional('cpuMs'),
    ...optional('mainBusy'),
    ...optional('postgresBusy'),
    ...(alongside ? { alongsideFigures: alongside } : {}),
  };
}

let scripts = 0;

async function runWrk(bench, target, seconds) {
  // One script per load: two loads may run at once (a reader alongside the orders).
  const script = join(bench.work, `request-${(scripts += 1)}.lua`);
  // wrk takes method, headers and body from a Lua script.
  writeFileSync(
    script,
    [
      `wrk.method = ${JSON.stringify(target.method)}`,
      ...Object.entries(target.headers ?? {}).map(
        ([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`,
      ),
      target.body === undefined ? '' : `wrk.body = ${JSON.stringify(JSON.stringify(target.body))}`,
      target.orders === undefined ? '' : orderScript(target.orders, bench.threads),
    ].join('\n'),
  );
  // Asynchronous, so the RSS sampler keeps running while wrk loads the server.
  const { stdout: output } = await promisify(execFile)(
    'wrk',
    [
      '-t',
      String(bench.threads),
      '-c',
      String(target.connections ?? bench.connections),
      '-d',
      `${seconds}s`,
      '--timeout',
      '5s',
      '--latency',
      '-s',
      script,
      `${target.server.url}${target.path}`,
    ],
    {
      encoding: 'utf8',
      timeout: (seconds + 30) * 1000,
    },
  );
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(output) ?? /Socket errors: (.*)/.exec(output);
  if (errors) throw new Error(`${target.name}: ${errors[0]}\n${output}`);
  return {
    requests: Number(/(\d+) requests in/.exec(output)[1]),
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)[1]),
    p50: toMs(/ 50%\s+([\d.]+\w+)/.exec(output)[1]),
    p99: toMs(/ 99%\s+([\d.]+\w+)/.exec(output)[1]),
  };
}

function toMs(text) {
  const [, number, unit] = /([\d.]+)(\w+)/.exec(text);
  return Number(number) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[unit];
}

async function runAutocannon(bench, target, seconds) {
  const { default: autocannon } = await import('autocannon');
  const nextOrder = target.orders && orderBodies(target.orders);
  const result = await autocannon({
    url: `${target.server.url}${target.path}`,
    method: target.method,
    headers: target.headers,
    body: target.body === undefined ? undefined : JSON.stringify(target.body),
    requests: nextOrder && [{ setupRequest: (request) => ({ ...request, body: nextOrder() }) }],
    connections: target.connections ?? bench.connections,
    duration: seconds,
  });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return {
    requests: result.requests.total,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}
