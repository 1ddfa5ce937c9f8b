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
// rate limits too high to refuse anything (bench/lib, as for npm run bench). Only loopback is ever
// loaded; every load is bounded.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { findLoadTool, load } from './lib/load.mjs';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { send } from './lib/setup.mjs';

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
const bench = {
  work: mkdtempSync(join(tmpdir(), 'rowi-weather-bench-')),
  children: new Set(),
  threads: 1,
  connections: Number(options.connections),
};
let provider;

try {
  await main();
} finally {
  await stopServers(bench);
  await provider?.close();
  rmSync(bench.work, { recursive: true, force: true });
}

async function main() {
  const tool = findLoadTool();
  provider = await startProvider(Number(options.latency));
  const rowi = await startRowi(
    bench,
    'rowi',
    sqliteEnv(join(bench.work, 'rowi.db'), 1, {
      ROWI_WEATHER_PROVIDER: 'open-meteo',
      ROWI_WEATHER_URL: provider.url,
      ROWI_WEATHER_CACHE_TTL: '3600',
    }),
  );
  const apiKey = await adminKeyOf(rowi);
  rowi.credentials = async () => ({ 'x-api-key': apiKey });
  const read = (path) => ({
    name: `GET ${path}`,
    server: rowi,
    method: 'GET',
    path,
    headers: { accept: 'application/json' },
    credentials: rowi.credentials,
  });

  const user = await send(rowi, 'POST', '/v1/users', { name: 'Bench', email: 'bench@example.com' }, 201);
  await send(
    rowi,
    'PUT',
    '/v1/weather/recorded',
    { temperature_c: 10, humidity_pct: 50, wind_kph: 5, conditions: 'clear', observed_at: new Date().toISOString() },
    201,
  );
  await send(rowi, 'PATCH', '/v1/weather/cached', { latitude: 52.52, longitude: 13.41 }, 201);
  await send(rowi, 'GET', '/v1/weather/cached', undefined, 200);

  console.log(
    `rowi ${rowi.url}, provider answering after ${options.latency} ms; ${rounds} rounds × ${duration} s, ${options.connections} connections\n`,
  );
  console.log('Coalescing (provider calls made for requests served):');
  let requests = 0;
  const callsBefore = provider.calls;
  for (let burst = 0; burst < Number(options.bursts); burst++) {
    const place = `burst-${burst}`;
    await send(rowi, 'PATCH', `/v1/weather/${place}`, { latitude: 10 + burst / 10, longitude: 20 + burst / 10 }, 201);
    await Promise.all(Array.from({ length: BURST }, () => send(rowi, 'GET', `/v1/weather/${place}`, undefined, 200)));
    requests += BURST;
  }
  console.log(
    `  ${options.bursts} bursts of ${BURST} concurrent reads of an uncached place: ${requests} requests, ${provider.calls - callsBefore} provider calls`,
  );
  await send(rowi, 'PATCH', '/v1/weather/under-load', { latitude: -33.87, longitude: 151.21 }, 201);
  const loadCallsBefore = provider.calls;
  const underLoad = await load(bench, tool, read('/v1/weather/under-load'), duration);
  console.log(
    `  ${tool} on an uncached place: ${underLoad.requests} requests, ${provider.calls - loadCallsBefore} provider call(s)\n`,
  );

  const targets = [
    ['GET /v1/users/{id}', read(`/v1/users/${user.id}`)],
    ['GET /v1/weather/{place}, recorded', read('/v1/weather/recorded')],
    ['GET /v1/weather/{place}, provider cache', read('/v1/weather/cached')],
  ];
  for (const connections of [bench.connections, 1]) {
    const samples = new Map(targets.map(([name]) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      for (const [name, target] of targets)
        samples.get(name).push(await load({ ...bench, connections }, tool, target, duration));
    }
    const median = (runs, key) => [...runs].sort((a, b) => a[key] - b[key])[Math.floor(runs.length / 2)][key];
    const reference = samples.get(targets[0][0]);
    const rows = targets.map(([name]) => {
      const runs = samples.get(name);
      const ratio = median(
        runs.map((run, round) => ({ ratio: run.rps / reference[round].rps })),
        'ratio',
      );
      return [
        name,
        median(runs, 'rps').toFixed(0),
        median(runs, 'p50').toFixed(2),
        median(runs, 'p99').toFixed(2),
        `${(ratio * 100).toFixed(1)} %`,
      ];
    });
    console.log(
      `${connections} connection${connections === 1 ? ' (the latency of one request at a time)' : 's'}, medians of ${rounds} rounds:`,
    );
    printTable(['request', 'req/s', 'p50 ms', 'p99 ms', 'vs users'], rows);
    console.log('');
  }
  console.log(
    `provider calls during the latency loads: ${provider.calls - loadCallsBefore - 1} (the cached place is never asked again within its TTL)`,
  );
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
      current_units: {
        time: 'iso8601',
        interval: 'seconds',
        temperature_2m: '°C',
        relative_humidity_2m: '%',
        wind_speed_10m: 'km/h',
        weather_code: 'wmo code',
      },
      current: {
        time: new Date().toISOString().slice(0, 14) + '00',
        interval: 900,
        temperature_2m: 5.3,
        relative_humidity_2m: 81,
        wind_speed_10m: 12.2,
        weather_code: 3,
      },
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

function printTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])))
      .join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}
