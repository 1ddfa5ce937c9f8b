// npm run bench [-- --duration 10 --quick --connections 64 --threads 1 --rounds 1]
//
// Loads rowi and a bare Fastify baseline over loopback in the same run and prints requests/s,
// p50, p99 and peak RSS of each, and the ratio rowi/baseline: these machines are noisy, so only
// figures measured side by side are compared. Every load is bounded in time.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: options } = parseArgs({
  options: {
    duration: { type: 'string', default: process.env.BENCH_DURATION ?? '10' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    // One wrk thread: on two cores it leaves one core to the server under test, and one thread
    // drives 64 connections far faster than one Node process can answer them.
    threads: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '1' },
    quick: { type: 'boolean', default: false },
  },
});
const duration = options.quick ? 3 : Number(options.duration);
const warmup = options.quick ? 1 : Number(options.warmup);
const connections = Number(options.connections);
const rounds = Number(options.rounds);

const work = mkdtempSync(join(tmpdir(), 'rowi-bench-'));
const children = new Set();
const cleanUp = () => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanUp();
  process.exit(130);
});

try {
  await main();
} finally {
  cleanUp();
}

async function main() {
  const tool = findLoadTool();
  const rowi = await startProcess('rowi', [join(root, 'dist/src/cli.js'), 'serve'], {
    ROWI_HOST: '127.0.0.1',
    ROWI_PORT: '0',
    ROWI_DATA: join(work, 'rowi.db'),
  }, /"msg":"listening on (http:\/\/[^"]+)\/v1"/);

  const users = await seedUsers(rowi.url, 1000);
  const probe = users[Math.floor(users.length / 2)];
  const bare = await startProcess('bare', [join(root, 'bench/bare-server.mjs')], { BARE_RECORD: JSON.stringify(probe) }, /listening (http:\/\/\S+)/);
  await sameAnswer(rowi.url, bare.url, `/v1/users/${probe.id}`);

  // A target is one request shape against one server; later issues add more (stock, orders, PostgreSQL).
  const targets = [
    { name: 'bare Fastify  GET /v1/users/{id}', server: bare, method: 'GET', path: `/v1/users/${probe.id}`, headers: { accept: 'application/json' } },
    { name: 'rowi (SQLite) GET /v1/users/{id}', server: rowi, method: 'GET', path: `/v1/users/${probe.id}`, headers: { accept: 'application/json' }, baseline: 'bare Fastify  GET /v1/users/{id}' },
  ];

  console.log(`load: ${tool}, ${connections} connections, ${options.threads} thread(s), ${warmup} s warm-up + ${duration} s per target, ${rounds} round(s)\n`);
  const samples = new Map(targets.map((target) => [target.name, []]));
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round so drift of the machine hits every target alike.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      await load(tool, target, warmup);
      samples.get(target.name).push(await measure(tool, target, duration));
    }
  }

  const results = targets.map((target) => ({ ...target, ...median(samples.get(target.name)) }));
  printTable(results);
  const rowiResult = results.find((result) => result.baseline);
  const bareResult = results.find((result) => result.name === rowiResult.baseline);
  const ratio = rowiResult.rps / bareResult.rps;
  console.log(`\nrowi/bare requests/s, same run: ${(ratio * 100).toFixed(1)} %`);
  console.log(`target: rowi >= 50 % of bare req/s ... ${ratio >= 0.5 ? 'PASS' : 'MISS'}`);
  console.log(`target: rowi p99 < 10 ms .......... ${rowiResult.p99 < 10 ? 'PASS' : 'MISS'} (${rowiResult.p99.toFixed(2)} ms)`);

  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const record = {
    at: new Date().toISOString(),
    tool,
    connections,
    threads: Number(options.threads),
    duration_s: duration,
    rounds,
    node: process.version,
    results: results.map(({ name, rps, p50, p99, rssMb }) => ({ name, rps, p50_ms: p50, p99_ms: p99, peak_rss_mb: rssMb })),
    ratio_rowi_over_bare: ratio,
  };
  writeFileSync(join(root, 'bench/results/latest.json'), `${JSON.stringify(record, null, 2)}\n`);
}

function findLoadTool() {
  const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
  if (has('wrk')) return 'wrk';
  console.log('wrk not found; trying apt-get install wrk …');
  spawnSync('sh', ['-c', 'DEBIAN_FRONTEND=noninteractive apt-get install -y wrk || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk)'], { stdio: 'ignore', timeout: 180_000 });
  if (has('wrk')) return 'wrk';
  console.log('wrk unavailable; falling back to autocannon');
  return 'autocannon';
}

/** Starts a server process whose log goes to a file (as in production) and waits for its URL. */
async function startProcess(name, args, env, listening) {
  const logFile = join(work, `${name}.log`);
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', openSync(logFile, 'w'), 'ignore'] });
  children.add(child);
  for (let waited = 0; waited < 20_000; waited += 50) {
    const match = listening.exec(readFileSync(logFile, 'utf8'));
    if (match) return { name, child, url: match[1] };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${name} did not start:\n${readFileSync(logFile, 'utf8')}`);
}

async function seedUsers(url, count) {
  const users = [];
  for (let start = 0; start < count; start += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, count - start) }, async (_, offset) => {
        const index = start + offset;
        const reply = await fetch(`${url}/v1/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: `Bench User ${index}`, email: `bench${index}@example.com` }),
        });
        if (reply.status !== 201) throw new Error(`seeding failed: ${reply.status} ${await reply.text()}`);
        return reply.json();
      }),
    );
    users.push(...batch);
  }
  return users;
}

async function sameAnswer(rowiUrl, bareUrl, path) {
  const [rowiReply, bareReply] = await Promise.all([fetch(`${rowiUrl}${path}`, { headers: { accept: 'application/json' } }), fetch(`${bareUrl}${path}`)]);
  if (rowiReply.status !== 200) throw new Error(`rowi answered ${rowiReply.status} to GET ${path}`);
  const [rowiBody, bareBody] = [await rowiReply.text(), await bareReply.text()];
  if (rowiBody !== bareBody) throw new Error(`the baseline does not return rowi's record:\n${rowiBody}\n${bareBody}`);
}

async function load(tool, target, seconds) {
  return tool === 'wrk' ? runWrk(target, seconds) : runAutocannon(target, seconds);
}

/** One measured run, with the server's peak RSS sampled while it is under load. */
async function measure(tool, target, seconds) {
  let peak = 0;
  const status = `/proc/${target.server.child.pid}/status`;
  const sampler = setInterval(() => {
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(status, 'utf8'));
    if (rss) peak = Math.max(peak, Number(rss[1]) / 1024);
  }, 100);
  try {
    return { ...(await load(tool, target, seconds)), rssMb: peak };
  } finally {
    clearInterval(sampler);
  }
}

async function runWrk(target, seconds) {
  const script = join(work, 'request.lua');
  // wrk takes method, headers and body from a Lua script.
  writeFileSync(
    script,
    [
      `wrk.method = ${JSON.stringify(target.method)}`,
      ...Object.entries(target.headers ?? {}).map(([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`),
      target.body === undefined ? '' : `wrk.body = ${JSON.stringify(JSON.stringify(target.body))}`,
    ].join('\n'),
  );
  // Asynchronous, so the RSS sampler keeps running while wrk loads the server.
  const { stdout: output } = await promisify(execFile)('wrk', ['-t', options.threads, '-c', String(connections), '-d', `${seconds}s`, '--timeout', '5s', '--latency', '-s', script, `${target.server.url}${target.path}`], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(output) ?? /Socket errors: (.*)/.exec(output);
  if (errors) throw new Error(`${target.name}: ${errors[0]}\n${output}`);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)[1]),
    p50: toMs(/ 50%\s+([\d.]+\w+)/.exec(output)[1]),
    p99: toMs(/ 99%\s+([\d.]+\w+)/.exec(output)[1]),
  };
}

function toMs(text) {
  const [, number, unit] = /([\d.]+)(\w+)/.exec(text);
  return Number(number) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[unit];
}

async function runAutocannon(target, seconds) {
  const { default: autocannon } = await import('autocannon');
  const result = await autocannon({
    url: `${target.server.url}${target.path}`,
    method: target.method,
    headers: target.headers,
    body: target.body === undefined ? undefined : JSON.stringify(target.body),
    connections,
    duration: seconds,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

function median(runs) {
  const pick = (key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
  return { rps: pick('rps'), p50: pick('p50'), p99: pick('p99'), rssMb: Math.max(...runs.map((run) => run.rssMb)) };
}

function printTable(results) {
  const rows = results.map((result) => [result.name, result.rps.toFixed(0), result.p50.toFixed(2), result.p99.toFixed(2), result.rssMb.toFixed(0)]);
  const header = ['target', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}
