// npm run bench:weather [-- --duration 5 --rounds 3 --connections 64 --latency 50]
//
// The weather provider path, measured against a local server playing Open-Meteo that answers
// after --latency ms (a provider across the internet), in one run:
//
// 1. Coalescing: bursts of 100 concurrent GET /v1/weather/{place} for places nobody has read
//    yet, and one wrk load on another uncached place; printed as provider calls made against
//    requests served.
// 2. The latency of a cached read: wrk on GET /v1/weather/{place} served from the provider cache,
//    beside two reads of the same rowi measured in the same rounds, one right after the other:
//    the place's recorded weather (no provider), and GET /v1/users/{id} (rowi's read by key, the
//    reference of the main bench); under load (--connections) and one request at a time.
//    Ratios are of loads measured side by side: machines are noisy.
//
// rowi runs as `rowi serve` from dist/ with one process, an API key and the audit trail on, and
// rate limits too high to refuse anything. Only loopback is ever loaded; every load is bounded.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: options } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    latency: { type: 'string', default: '50' },
    bursts: { type: 'string', default: '10' },
  },
});
const duration = Number(options.duration);
const rounds = Number(options.rounds);
const BURST = 100;
const CLI = join(root, 'dist/src/cli.js');
const LISTENING = /"msg":"listening on (http:\/\/[^"\s]+)\/v1/;
const work = mkdtempSync(join(tmpdir(), 'rowi-weather-bench-'));
let rowi;
let provider;

try {
  await main();
} finally {
  rowi?.kill('SIGTERM');
  await provider?.close();
  rmSync(work, { recursive: true, force: true });
}

async function main() {
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('wrk is needed: apt-get install wrk');
  provider = await startProvider(Number(options.latency));
  const server = await startRowi({
    ROWI_WEATHER_PROVIDER: 'open-meteo',
    ROWI_WEATHER_URL: provider.url,
    ROWI_WEATHER_CACHE_TTL: '3600',
  });
  const call = caller(server);

  const user = await call('POST', '/v1/users', { name: 'Bench', email: 'bench@example.com' }, 201);
  await call('PUT', '/v1/weather/recorded', { temperature_c: 10, humidity_pct: 50, wind_kph: 5, conditions: 'clear', observed_at: new Date().toISOString() }, 201);
  await call('PATCH', '/v1/weather/cached', { latitude: 52.52, longitude: 13.41 }, 201);
  await call('GET', '/v1/weather/cached', undefined, 200);

  console.log(`rowi ${server.url}, provider answering after ${options.latency} ms; ${rounds} rounds × ${duration} s, ${options.connections} connections\n`);
  console.log('Coalescing (provider calls made for requests served):');
  let requests = 0;
  const callsBefore = provider.calls;
  for (let burst = 0; burst < Number(options.bursts); burst++) {
    const place = `burst-${burst}`;
    await call('PATCH', `/v1/weather/${place}`, { latitude: 10 + burst / 10, longitude: 20 + burst / 10 }, 201);
    const statuses = await Promise.all(Array.from({ length: BURST }, () => fetch(`${server.url}/v1/weather/${place}`, { headers: server.headers }).then(async (reply) => (await reply.arrayBuffer(), reply.status))));
    if (statuses.some((status) => status !== 200)) throw new Error(`a burst got ${statuses.filter((status) => status !== 200).join(', ')}`);
    requests += BURST;
  }
  console.log(`  ${options.bursts} bursts of ${BURST} concurrent reads of an uncached place: ${requests} requests, ${provider.calls - callsBefore} provider calls`);
  await call('PATCH', '/v1/weather/under-load', { latitude: -33.87, longitude: 151.21 }, 201);
  const loadCallsBefore = provider.calls;
  const underLoad = await wrk(server, '/v1/weather/under-load', duration);
  console.log(`  wrk on an uncached place: ${underLoad.requests} requests, ${provider.calls - loadCallsBefore} provider call(s)\n`);

  const targets = [
    ['GET /v1/users/{id}', `/v1/users/${user.id}`],
    ['GET /v1/weather/{place}, recorded', '/v1/weather/recorded'],
    ['GET /v1/weather/{place}, provider cache', '/v1/weather/cached'],
  ];
  for (const connections of [Number(options.connections), 1]) {
    const samples = new Map(targets.map(([name]) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      for (const [name, path] of targets) samples.get(name).push(await wrk(server, path, duration, connections));
    }
    const median = (runs, key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
    const reference = samples.get(targets[0][0]);
    const rows = targets.map(([name]) => {
      const runs = samples.get(name);
      const ratio = median(runs.map((run, round) => ({ ratio: run.rps / reference[round].rps })), 'ratio');
      return [name, median(runs, 'rps').toFixed(0), median(runs, 'p50').toFixed(2), median(runs, 'p99').toFixed(2), `${(ratio * 100).toFixed(1)} %`];
    });
    console.log(`${connections} connection${connections === 1 ? ' (the latency of one request at a time)' : 's'}, medians of ${rounds} rounds:`);
    printTable(['request', 'req/s', 'p50 ms', 'p99 ms', 'vs users'], rows);
    console.log('');
  }
  console.log(`provider calls during the latency loads: ${provider.calls - loadCallsBefore - 1} (the cached place is never asked again within its TTL)`);
}

/** A server answering Open-Meteo's documented forecast format after `latencyMs`, counting calls. */
async function startProvider(latencyMs) {
  let calls = 0;
  const server = createServer((request, response) => {
    calls++;
    const url = new URL(request.url, 'http://provider');
    const body = JSON.stringify({
      latitude: Number(url.searchParams.get('latitude')),
      longitude: Number(url.searchParams.get('longitude')),
      generationtime_ms: 0.05,
      utc_offset_seconds: 0,
      timezone: 'GMT',
      timezone_abbreviation: 'GMT',
      elevation: 38,
      current_units: { time: 'iso8601', interval: 'seconds', temperature_2m: '°C', relative_humidity_2m: '%', wind_speed_10m: 'km/h', weather_code: 'wmo code' },
      current: { time: new Date().toISOString().slice(0, 14) + '00', interval: 900, temperature_2m: 5.3, relative_humidity_2m: 81, wind_speed_10m: 12.2, weather_code: 3 },
    });
    setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end(body), latencyMs);
  });
  await new Promise((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    get calls() {
      return calls;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** `rowi serve` on a fresh SQLite file, port 0, one process; resolves with its URL and admin key. */
async function startRowi(env) {
  const logFile = join(work, 'rowi.log');
  const errFile = join(work, 'rowi.stderr');
  const limits = Object.fromEntries(['ANONYMOUS', 'READER', 'EDITOR', 'ADMIN', 'ORDERS_CREATE'].map((policy) => [`ROWI_RATE_LIMIT_${policy}`, '1000000000']));
  rowi = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...process.env, ROWI_PORT: '0', ROWI_WORKERS: '1', ROWI_DATA: join(work, 'rowi.db'), ROWI_REDIS_URL: '', ROWI_DATABASE_URL: '', ...limits, ...env },
    stdio: ['ignore', openSync(logFile, 'w'), openSync(errFile, 'w')],
  });
  for (let waited = 0; waited < 20_000; waited += 50) {
    const url = LISTENING.exec(readFileSync(logFile, 'utf8'))?.[1];
    const key = /^ {2}ROWI_KEY=(rowi_\S+)$/m.exec(readFileSync(errFile, 'utf8'))?.[1];
    if (url && key) {
      // rowi sheds load for its first second (start-up stalls its event loop): let it pass.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      return { url, headers: { 'x-api-key': key, accept: 'application/json' } };
    }
    if (rowi.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`rowi did not start:\n${readFileSync(logFile, 'utf8')}${readFileSync(errFile, 'utf8')}`);
}

function caller(server) {
  return async (method, path, body, status) => {
    const headers = { ...server.headers, ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }) };
    const reply = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await reply.text();
    if (reply.status !== status) throw new Error(`setting up: ${method} ${path} answered ${reply.status}: ${text}`);
    return text === '' ? undefined : JSON.parse(text);
  };
}

/** One wrk load (1 thread: the other core is rowi's); fails on any non-2xx or socket error. */
async function wrk(server, path, seconds, connections = Number(options.connections)) {
  const script = join(work, 'request.lua');
  writeFileSync(script, Object.entries(server.headers).map(([name, value]) => `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`).join('\n'));
  const { stdout } = await promisify(execFile)('wrk', ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, '--timeout', '5s', '--latency', '-s', script, `${server.url}${path}`], {
    encoding: 'utf8',
    timeout: (seconds + 30) * 1000,
  });
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(stdout) ?? /Socket errors: (.*)/.exec(stdout);
  if (errors) throw new Error(`${path}: ${errors[0]}\n${stdout}`);
  const ms = (text) => {
    const [, number, unit] = /([\d.]+)(\w+)/.exec(text);
    return Number(number) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[unit];
  };
  return {
    requests: Number(/(\d+) requests in/.exec(stdout)[1]),
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)[1]),
    p50: ms(/ 50%\s+([\d.]+\w+)/.exec(stdout)[1]),
    p99: ms(/ 99%\s+([\d.]+\w+)/.exec(stdout)[1]),
  };
}

function printTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}
