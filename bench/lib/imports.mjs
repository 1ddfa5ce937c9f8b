// The import targets (bench/NOTES.md "Imports"): a CSV of new items with their stock levels,
// uploaded to POST /v1/items/import (mode=partial), timed from the upload's first byte to the
// operation's end, on SQLite (the main rowi) and on PostgreSQL (a rowi of its own, in a schema of
// its own); the server's RSS sampled while it runs (its growth over the RSS before the upload),
// for 100,000 and 1,000,000 rows; and, during one more 100,000-row import on SQLite before them,
// GET /v1/users/{id} one request after another on one kept-alive connection (its p99). Bounded: each import waits at
// most IMPORT_TIMEOUT_MS, the reader stops with the import or at READS_AT_MOST.
import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { rssMbOf } from './processes.mjs';

/**
 * CPU seconds the processes have used (user + system, from /proc): on a machine other loads share,
 * rows per CPU second of rowi says what the import costs, where rows per second says how the machine was.
 */
function cpuSecondsOf(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // It ended.
    }
  }
  return ticks / 100;
}

export const IMPORT_OPERATION = 'POST /v1/items/import';
export const IMPORT_GOALS = { sqliteRowsPerS: 25_000, postgresRowsPerS: 10_000, rssGrowthMb: 60, getP99Ms: 25 };
const IMPORT_TIMEOUT_MS = 600_000;
const READS_AT_MOST = 500_000;
const POLL_MS = 100;

/** A CSV of `rows` new items (SKUs of this run) with stock levels, written to disk a line at a time. */
async function writeCatalogue(path, rows, stamp) {
  const out = createWriteStream(path);
  out.write('sku,name,price,quantity\n');
  for (let index = 0; index < rows; index++) {
    const price = `${1 + Math.floor((index % 10000) / 100)}.${String(index % 100).padStart(2, '0')}`;
    const line = `IMP-${stamp}-${index},Imported item ${index},${price},${index % 500}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return statSync(path).size;
}

function httpJson(server, headers, method, path, body, contentType) {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      new URL(path, server.url),
      {
        method,
        headers: { ...headers, accept: 'application/json', ...(contentType ? { 'content-type': contentType } : {}) },
        timeout: IMPORT_TIMEOUT_MS,
      },
      (reply) => {
        let text = '';
        reply.setEncoding('utf8');
        reply.on('data', (chunk) => (text += chunk));
        reply.on('end', () =>
          resolve({ status: reply.statusCode, headers: reply.headers, body: text ? JSON.parse(text) : undefined }),
        );
        reply.on('error', reject);
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error(`${method} ${path} timed out`)));
    outgoing.on('error', reject);
    if (body === undefined) outgoing.end();
    else body.pipe(outgoing);
  });
}

/** One import of a file of `rows` items: its rate (end to end), the operation's own running time and the RSS growth. */
async function importOnce(server, pids, folder, rows, alongside) {
  const stamp = `${Date.now()}-${rows}`;
  const file = join(folder, `catalogue-${stamp}.csv`);
  const bytes = await writeCatalogue(file, rows, stamp);
  const headers = await server.credentials();
  const before = rssMbOf(pids);
  const cpuBefore = cpuSecondsOf(pids);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMbOf(pids))), 100);
  const reader = alongside?.start();
  const start = process.hrtime.bigint();
  try {
    const posted = await httpJson(
      server,
      { ...headers, 'content-length': String(bytes) },
      'POST',
      '/v1/items/import?mode=partial',
      createReadStream(file),
      'text/csv',
    );
    if (posted.status !== 202)
      throw new Error(`POST /v1/items/import answered ${posted.status}: ${JSON.stringify(posted.body)}`);
    const deadline = Date.now() + IMPORT_TIMEOUT_MS;
    let operation = posted.body;
    let shed = 0;
    while (['queued', 'running'].includes(operation.status)) {
      if (Date.now() > deadline) throw new Error(`the import of ${rows} rows did not end in ${IMPORT_TIMEOUT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      const polled = await httpJson(server, headers, 'GET', posted.headers.location);
      // 503: the poll was shed (rowi's event loop lagged past ROWI_MAX_EVENT_LOOP_DELAY), not the import's end: asked again.
      if (polled.status === 503) shed++;
      else operation = polled.body;
    }
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (operation.status !== 'succeeded' || operation.progress.rows_succeeded !== rows)
      throw new Error(`the import of ${rows} rows ended ${operation.status}: ${JSON.stringify(operation.summary)}`);
    const runningMs = Date.parse(operation.finished_at) - Date.parse(operation.started_at);
    const cpuS = cpuSecondsOf(pids) - cpuBefore;
    return {
      alongside: alongside !== undefined,
      cpu_s: cpuS,
      rows_per_cpu_s: rows / cpuS,
      rows,
      bytes,
      ms,
      rows_per_s: (rows / ms) * 1000,
      running_rows_per_s: (rows / runningMs) * 1000,
      rss_before_mb: before,
      rss_growth_mb: peak - before,
      polls_shed: shed,
    };
  } finally {
    clearInterval(sampler);
    if (reader) await alongside.stop(reader);
  }
}

/** GET `path` one after another on one kept-alive connection until stopped; the latencies. */
function reader(server, path) {
  return {
    start() {
      const state = { stopped: false, latencies: [] };
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      state.done = (async () => {
        const headers = await server.credentials();
        while (!state.stopped && state.latencies.length < READS_AT_MOST) {
          const begin = process.hrtime.bigint();
          const status = await new Promise((resolve, reject) => {
            const outgoing = request(
              new URL(path, server.url),
              { agent, headers: { ...headers, accept: 'application/json' }, timeout: 10_000 },
              (reply) => {
                reply.resume();
                reply.on('end', () => resolve(reply.statusCode));
              },
            );
            outgoing.on('timeout', () => outgoing.destroy(new Error(`GET ${path} timed out`)));
            outgoing.on('error', reject);
            outgoing.end();
          });
          if (status !== 200) throw new Error(`GET ${path} answered ${status} during the import`);
          state.latencies.push(Number(process.hrtime.bigint() - begin) / 1e6);
        }
        agent.destroy();
      })();
      return state;
    },
    async stop(state) {
      state.stopped = true;
      await state.done;
    },
  };
}

const percentile = (values, p) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))];

/**
 * The import targets on `sqlite` (the main rowi) and, when given, `postgres` (a rowi on PostgreSQL
 * of its own); either may be left out. `probePath` is the GET read alongside an import on SQLite:
 * as the orders target measures its reader, on an import of its own (the first of `rowCounts`'
 * size, run first), so that the rates are those of imports with nothing beside them and the p99 is
 * that of a reader beside an import.
 */
export async function measureImports({ sqlite, postgres, folder, probePath, rowCounts = [100_000, 1_000_000] }) {
  const results = { sqlite: [], postgres: [] };
  const pidsOf = (server) => [server.child.pid];
  let reads = [];
  if (sqlite && probePath) {
    const alongside = reader(sqlite, probePath);
    results.beside = await importOnce(sqlite, pidsOf(sqlite), folder, rowCounts[0], {
      start: () => alongside.start(),
      stop: async (state) => {
        await alongside.stop(state);
        reads = state.latencies;
      },
    });
  }
  for (const rows of sqlite ? rowCounts : [])
    results.sqlite.push(await importOnce(sqlite, pidsOf(sqlite), folder, rows));
  if (postgres)
    for (const rows of rowCounts) results.postgres.push(await importOnce(postgres, pidsOf(postgres), folder, rows));
  results.get = { requests: reads.length, p50: percentile(reads, 0.5), p99: percentile(reads, 0.99) };
  return results;
}

/** The goal lines, as printGoals shows the others. */
export function importGoalLines(results) {
  const lines = [];
  const rate = (where, goal, result) => ({
    verdict: result.rows_per_s >= goal ? '✓' : '✗',
    label: `import of ${result.rows.toLocaleString('en')} items from CSV with stock levels (${where}), upload to end`,
    goal: `≥ ${goal.toLocaleString('en')} rows/s`,
    figure: `${result.rows_per_s.toFixed(0)} rows/s (${(result.ms / 1000).toFixed(1)} s; the operation itself ${result.running_rows_per_s.toFixed(0)} rows/s; rowi used ${result.cpu_s.toFixed(1)} s of CPU: ${((result.cpu_s / result.rows) * 1e6).toFixed(0)} µs a row${result.polls_shed > 0 ? `; ${result.polls_shed} polls of the operation shed (503)` : ''})`,
  });
  const memory = (where, result) => ({
    verdict: result.rss_growth_mb <= IMPORT_GOALS.rssGrowthMb ? '✓' : '✗',
    label: `RSS growth during the import of ${result.rows.toLocaleString('en')} rows (${where})`,
    goal: `≤ ${IMPORT_GOALS.rssGrowthMb} MB`,
    figure: `+${result.rss_growth_mb.toFixed(0)} MB over ${result.rss_before_mb.toFixed(0)} MB`,
  });
  for (const result of results.sqlite) lines.push(rate('SQLite', IMPORT_GOALS.sqliteRowsPerS, result));
  for (const result of results.postgres) lines.push(rate('PostgreSQL', IMPORT_GOALS.postgresRowsPerS, result));
  for (const result of results.sqlite) lines.push(memory('SQLite', result));
  for (const result of results.postgres) lines.push(memory('PostgreSQL', result));
  if (results.get.requests > 0) {
    const beside = results.beside;
    lines.push({
      verdict: results.get.p99 <= IMPORT_GOALS.getP99Ms ? '✓' : '✗',
      label: `GET /v1/users/{id} on one connection while ${beside.rows.toLocaleString('en')} items are imported (SQLite)`,
      goal: `p99 ≤ ${IMPORT_GOALS.getP99Ms} ms`,
      figure: `p99 ${results.get.p99.toFixed(1)} ms, p50 ${results.get.p50.toFixed(1)} ms, ${results.get.requests} requests; the import beside them ${beside.rows_per_s.toFixed(0)} rows/s, rowi used ${((beside.cpu_s / beside.rows) * 1e6).toFixed(0)} µs of CPU a row with the GETs, RSS +${beside.rss_growth_mb.toFixed(0)} MB`,
    });
  }
  return lines;
}
