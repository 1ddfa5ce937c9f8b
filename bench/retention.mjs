// npm run bench:retention [-- --rows 5000000 --duration 5 --rounds 3 --wait 300]
//
// Reads while the audit trail's backlog is pruned (bench/NOTES.md "Pruning a backlog"), on
// SQLite, one process each, in one run:
//
// - "no backlog": rowi on a database of 200 users and an empty audit trail;
// - "pruning": rowi on a copy of that database with `--rows` audit events (5 million by default)
//   recorded 200 days ago, past the default retention of 90 days, so its background pruning
//   (db/retention.ts) deletes them while the reads are measured. The rows are made with one
//   INSERT … SELECT over a recursive sequence (a realistic row each: a 32-character request id,
//   a caller, a path, a status), not through the API: 5 million requests would take hours here.
//
// Each round loads GET /v1/users/{id} with 64 connections on both, in turn; printed: requests/s,
// p50 and p99 of each, the ratio, the rows pruned during each load, and the targets of
// docs/performance.md (p99 ≤ 10 ms for one process; the run's own no-backlog p99 beside it). Then
// it waits (at most `--wait` seconds) for the backlog to be gone and prints the pruning rate.
// Loopback only; every load bounded in time.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execute, openSqliteConnection } from '../dist/src/db/sqlite-connection.js';
import { findLoadTool, measure } from './lib/load.mjs';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { copyDatabase, seedUsers } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    rows: { type: 'string', default: '5000000' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    wait: { type: 'string', default: '300' },
  },
});
const rows = Number(options.rows);
const duration = Number(options.duration);
const rounds = Number(options.rounds);
const READ_P99_MS = 10;
const bench = {
  work: mkdtempSync(join(tmpdir(), 'rowi-retention-bench-')),
  children: new Set(),
  threads: 1,
  connections: Number(options.connections),
};

try {
  await main();
} finally {
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
}

async function main() {
  const tool = findLoadTool();
  const freshData = join(bench.work, 'fresh.db');
  const fresh = await startRowi(bench, 'no-backlog', sqliteEnv(freshData, 1));
  const adminKey = await adminKeyOf(fresh);
  const credentials = async () => ({ 'x-api-key': adminKey });
  fresh.credentials = credentials;
  const users = await seedUsers(fresh, 200);
  const probePath = `/v1/users/${users[100].id}`;

  const backlogData = join(bench.work, 'backlog.db');
  await copyDatabase(freshData, backlogData);
  const started = Date.now();
  await fillAuditTrail(backlogData, rows);
  const fillSeconds = (Date.now() - started) / 1000;
  console.log(`${rows.toLocaleString('en')} audit rows made with one INSERT … SELECT in ${fillSeconds.toFixed(1)} s`);

  const pruningStarted = Date.now();
  const pruning = await startRowi(bench, 'pruning', sqliteEnv(backlogData, 1));
  pruning.credentials = credentials;
  const target = (server) => ({
    name: `${server.name} GET /v1/users/{id}`,
    server,
    method: 'GET',
    path: probePath,
    headers: { 'x-api-key': adminKey, accept: 'application/json' },
  });

  const figures = { 'no-backlog': [], pruning: [] };
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [pruning, fresh] : [fresh, pruning];
    for (const server of order) {
      const before = await prunedRows(server, adminKey);
      const result = await measure(bench, tool, target(server), duration);
      const pruned = (await prunedRows(server, adminKey)) - before;
      figures[server.name].push({ ...result, pruned });
      console.log(
        `round ${round + 1}, ${server.name.padEnd(10)} ${result.rps.toFixed(0).padStart(6)} req/s  p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms  rows pruned meanwhile ${pruned.toLocaleString('en')}`,
      );
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const summary = (name) => ({
    rps: median(figures[name].map((each) => each.rps)),
    p99: median(figures[name].map((each) => each.p99)),
    pruned: figures[name].reduce((sum, each) => sum + each.pruned, 0),
  });
  const without = summary('no-backlog');
  const during = summary('pruning');
  console.log(`\nMedians of ${rounds} rounds of ${duration} s, ${bench.connections} connections:`);
  console.log(`  no backlog         ${without.rps.toFixed(0)} req/s, p99 ${without.p99.toFixed(2)} ms`);
  console.log(
    `  while pruning      ${during.rps.toFixed(0)} req/s, p99 ${during.p99.toFixed(2)} ms (${((during.rps / without.rps) * 100).toFixed(1)} % of the requests/s; ${during.pruned.toLocaleString('en')} rows pruned during these loads)`,
  );
  const verdict = (met) => (met ? '✓' : '✗');
  console.log('\nTargets (docs/performance.md), measured in this run:');
  console.log(
    `  ${verdict(during.p99 <= READ_P99_MS)} GET /v1/users/{id} p99 while a backlog is pruned <= ${READ_P99_MS} ms  measured: p99 ${during.p99.toFixed(2)} ms (no backlog, same run: ${verdict(without.p99 <= READ_P99_MS)} ${without.p99.toFixed(2)} ms)`,
  );
  console.log(
    `  ${verdict(during.pruned > 0)} the backlog is pruned during the loads  measured: ${during.pruned.toLocaleString('en')} rows`,
  );

  const waitStart = Date.now();
  let pruned = await prunedRows(pruning, adminKey);
  while (pruned < rows && Date.now() - waitStart < Number(options.wait) * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    pruned = await prunedRows(pruning, adminKey);
  }
  const seconds = (Date.now() - pruningStarted) / 1000;
  console.log(
    `\nPruned ${pruned.toLocaleString('en')} of ${rows.toLocaleString('en')} rows ${pruned >= rows ? '(all)' : `(stopped waiting after ${options.wait} s)`}; about ${(pruned / seconds).toFixed(0)} rows/s since rowi started, loads included`,
  );
}

/** The audit trail of a database, grown by `count` rows 200 days old, in one statement. */
async function fillAuditTrail(file, count) {
  const connection = await openSqliteConnection(file, { synchronous: 'normal', busyTimeoutMs: 5000 });
  try {
    const start = Date.now() - 200 * 86_400_000;
    execute(
      connection.prepare(`
        with recursive sequence(n) as (select 1 union all select n + 1 from sequence where n < ?)
        insert into audit_events
          (at, request_id, caller_id, caller_name, credential, method, path, resource, record_id, action, status, duration_ms, client_ip)
        select strftime('%Y-%m-%dT%H:%M:%fZ', (? + n) / 1000.0, 'unixepoch'), lower(hex(randomblob(16))), 1, 'admin',
               'api_key', 'GET', '/v1/users/' || (n % 200 + 1), 'users', cast(n % 200 + 1 as text), 'read', 200,
               1.25, '127.0.0.1'
        from sequence`),
      [count, start],
    );
  } finally {
    connection.close();
  }
}

/** rowi_retention_pruned_rows_total of the audit trail, from the server's /metrics. */
async function prunedRows(server, adminKey) {
  const text = await fetch(`${server.url}/metrics`, { headers: { 'x-api-key': adminKey } }).then((reply) =>
    reply.text(),
  );
  const match = /^rowi_retention_pruned_rows_total\{table="audit_events"\} (\d+)/m.exec(text);
  return match === null ? 0 : Number(match[1]);
}
