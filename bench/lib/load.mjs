// Loading one target over loopback: wrk when installed (else autocannon), with bench.connections
// connections and bench.threads wrk threads. Every load is bounded in time, and any non-2xx
// answer or socket error fails the run: a refusal measured would not be the operation.
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { orderBodies, orderScript } from './order-mix.mjs';
import { descendantsOf } from './processes.mjs';

export function findLoadTool() {
  const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
  if (has('wrk')) return 'wrk';
  console.log('wrk not found; trying apt-get install wrk …');
  spawnSync('sh', ['-c', 'DEBIAN_FRONTEND=noninteractive apt-get install -y wrk || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk)'], { stdio: 'ignore', timeout: 180_000 });
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
  for (const [, status] of readFileSync(server.logFile).subarray(offset).toString('utf8').matchAll(/"status":(\d+)/g)) {
    if (!status.startsWith('2')) counts.set(status, (counts.get(status) ?? 0) + 1);
  }
  return counts.size === 0 ? '' : `\n${server.name} logged: ${[...counts].map(([status, count]) => `${status} ×${count}`).join(', ')}`;
}

/**
 * One measured run, with the server's peak RSS sampled while it is under load: with worker
 * processes, the sum over the primary and its workers (listed once, as the load starts).
 */
export async function measure(bench, tool, target, seconds) {
  let peak = 0;
  const pids = [target.server.child.pid, ...descendantsOf(target.server.child.pid)];
  const sampler = setInterval(() => {
    let kb = 0;
    for (const pid of pids) {
      try {
        const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
        if (rss) kb += Number(rss[1]);
      } catch {
        // A worker that ended (rowi replaces it; the load then fails or goes on without it).
      }
    }
    peak = Math.max(peak, kb / 1024);
  }, 100);
  try {
    return { ...(await load(bench, tool, target, seconds)), rssMb: peak };
  } finally {
    clearInterval(sampler);
  }
}

/** The median of each figure over runs (each sorted on its own), and the peak RSS of them all. */
export function median(runs) {
  const pick = (key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
  return { rps: pick('rps'), p50: pick('p50'), p99: pick('p99'), rssMb: Math.max(...runs.map((run) => run.rssMb)) };
}

async function runWrk(bench, target, seconds) {
  const script = join(bench.work, 'request.lua');
  // wrk takes method, headers and body from a Lua script.
  writeFileSync(
    script,
    [
      `wrk.method = ${JSON.stringify(target.method)}`,
      ...Object.entries(target.headers ?? {}).map(([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`),
      target.body === undefined ? '' : `wrk.body = ${JSON.stringify(JSON.stringify(target.body))}`,
      target.orders === undefined ? '' : orderScript(target.orders, bench.threads),
    ].join('\n'),
  );
  // Asynchronous, so the RSS sampler keeps running while wrk loads the server.
  const { stdout: output } = await promisify(execFile)('wrk', ['-t', String(bench.threads), '-c', String(bench.connections), '-d', `${seconds}s`, '--timeout', '5s', '--latency', '-s', script, `${target.server.url}${target.path}`], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
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
    connections: bench.connections,
    duration: seconds,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { requests: result.requests.total, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}
