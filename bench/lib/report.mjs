// What a run prints: the table of targets, the ratios measured within the run, and the goals.
import { RATE_LIMIT_OPERATION, columnOf, isReference } from './targets.mjs';

// What rowi must reach (docs/performance.md); each is printed beside what this run measured, with ✓
// or ✗. Ratios are over a target of the same run: the bare baseline, rowi without authentication,
// rowi with rate limits off, or rowi in one process.
const RSS_LIMIT_MB = 120;
const GOALS = [
  {
    label: 'RSS idle, 1 process (started, before any load)',
    idle: (r) => r.server?.name === 'rowi',
    maxRssMb: 80,
  },
  {
    label: 'RSS idle, --workers 2, all its processes together',
    idle: (r) => r.storage === 'SQLite' && r.workers === 2,
    maxRssMb: 200,
  },
  {
    label: 'RSS of the primary of --workers 2 (idle, and its peak under load)',
    primary: (r) => r.storage === 'SQLite' && r.workers === 2,
    maxRssMb: 50,
  },
  {
    label: 'POST /v1/orders, SQLite (synchronous=FULL), 1 process',
    find: (r) => r.operation === 'POST /v1/orders' && r.credential === 'API key' && isReference(r) && !r.alongsideOf,
    minRps: 4000,
    maxP99: 50,
  },
  {
    label: 'POST /v1/orders, PostgreSQL, 1 process',
    find: (r) => r.operation === 'POST /v1/orders' && r.storage === 'PostgreSQL' && r.workers === 1,
    minRps: 2000,
    maxP99: 50,
  },
  {
    label: 'GET /v1/users/{id} (1 connection) while POST /v1/orders loads 64 others, SQLite',
    find: (r) => r.alongsideOf !== undefined,
    maxP99: 25,
  },
  {
    label: 'GET /v1/users/{id}, API key + audit, 1 process, over bare Fastify',
    find: (r) => r.operation === 'GET /v1/users/{id}' && isReference(r) && r.credential === 'API key',
    minRatio: 0.5,
    maxP99: 15,
  },
  { label: 'GET /v1/users/{id}, 2 worker processes over 1', speedUp: 'SQLite', minSpeedUp: 1.5 },
  {
    label: `peak RSS under load, 1 process (every load of the main rowi)`,
    rss: (r) => r.server?.name === 'rowi',
    maxRssMb: RSS_LIMIT_MB,
  },
  {
    label: `peak RSS under load, 2 worker processes together`,
    rss: (r) => r.storage === 'SQLite' && r.workers === 2,
    maxRssMb: 2 * RSS_LIMIT_MB,
  },
  {
    label: 'GET /v1/users/{id}, API key + audit, over no authentication',
    find: (r) => r.operation === 'GET /v1/users/{id}' && r.credential === 'API key' && r.noAuth !== undefined,
    minRatioToNoAuth: 0.85,
  },
  {
    label: 'GET /v1/users/{id}, JWT + audit, over no authentication',
    find: (r) => r.operation === 'GET /v1/users/{id}' && r.credential === 'JWT' && r.noAuth !== undefined,
    minRatioToNoAuth: 0.85,
  },
  { label: 'GET /v1/users/{id}, rate limits in memory, over limits off', counted: 'memory', minRatioToLimitsOff: 0.95 },
  { label: 'GET /v1/users/{id}, rate limits in Redis, over limits off', counted: 'redis', minRatioToLimitsOff: 0.85 },
];

/**
 * What holds a target below its requests/s goal, as measured in its load: how busy the server's
 * main thread was, and the requests/s that thread would serve if it were busy all the time (its
 * ceiling on one core, at this run's CPU cost per request).
 */
function heldBy(result) {
  if (result.mainBusy === undefined || result.mainBusy === 0) return '';
  const mainMsPerRequest = (result.mainBusy * 1000) / result.rps;
  const postgres =
    result.postgresBusy > 0
      ? `; PostgreSQL's processes ${(result.postgresBusy * 100).toFixed(0)} % of a core, ${((result.postgresBusy * 1000) / result.rps).toFixed(3)} ms a request`
      : '';
  return `; main thread busy ${(result.mainBusy * 100).toFixed(0)} % of a core, ${mainMsPerRequest.toFixed(3)} ms a request: at most ${(1000 / mainMsPerRequest).toFixed(0)} req/s on one core${postgres}`;
}

export function printTable(results) {
  const loop = (result) =>
    result.loopP99 === null || result.loopP99 === undefined
      ? '-'
      : `${result.loopP99.toFixed(1)} / ${result.loopMax.toFixed(1)}`;
  const cpu = (result) =>
    result.cpuMs === undefined ? '-' : `${result.cpuMs.toFixed(3)} / ${(result.mainBusy * 100).toFixed(0)} %`;
  const rows = results.map((result) => [
    result.label,
    result.operation,
    result.rps.toFixed(0),
    result.p50.toFixed(2),
    result.p99.toFixed(2),
    result.rssMb.toFixed(0),
    loop(result),
    cpu(result),
  ]);
  const header = [
    'target',
    'request',
    'req/s',
    'p50 ms',
    'p99 ms',
    'peak RSS MB',
    'loop delay p99 / max ms',
    'CPU ms/req / main thread busy',
  ];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) =>
    cells.map((cell, column) => (column < 2 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

/**
 * The median over rounds of one target's requests/s over another's in the same round. Targets
 * compared are loaded one right after the other in every round, so each ratio is of two loads
 * seconds apart: the machine's drift (seen here: the same load varying by 2x within a minute)
 * cancels in the pair, which a ratio of two medians taken minutes apart does not do.
 */
export function pairedRatio(samples, name, over) {
  const ratios = samples
    .get(name)
    .map((run, round) => run.rps / samples.get(over)[round].rps)
    .sort((a, b) => a - b);
  return ratios[Math.floor(ratios.length / 2)];
}

/**
 * rowi's requests/s over its baseline's, per operation, both from this run: rowi on SQLite in one
 * process under the operation's name, the other storages and processes as "operation (column)".
 */
export function ratiosOf(results, samples) {
  const rowiResults = results.filter((result) => result.baseline);
  return new Map(
    rowiResults.map((result) => [
      isReference(result) ? result.operation : `${result.operation} (${columnOf(result)})`,
      pairedRatio(samples, result.name, result.baseline),
    ]),
  );
}

/** rowi with credentials and the audit trail over rowi without them, by target name, same run. */
export function authRatiosOf(results, samples) {
  const withAuth = results.filter((result) => result.noAuth);
  return new Map(withAuth.map((result) => [result.name, pairedRatio(samples, result.name, result.noAuth)]));
}

/** rowi counting rate limits over the same rowi with every limit off, by where it counts ("memory", "redis"), same run. */
export function limitRatiosOf(results, samples) {
  const counting = results.filter((result) => result.limitsOff);
  return new Map(counting.map((result) => [result.counted, pairedRatio(samples, result.name, result.limitsOff)]));
}

export function printRatios(rounds, ratios, authRatios, limitRatios, redis) {
  const width = Math.max(...[...ratios.keys(), ...authRatios.keys()].map((name) => name.length)) + 4;
  const percent = (ratio) => `${(ratio * 100).toFixed(1)} %`;
  console.log(
    `\nrowi/bare requests/s, same run${rounds > 1 ? ` (median over ${rounds} rounds of the ratio within a round)` : ''}:`,
  );
  for (const [operation, ratio] of ratios) console.log(`  ${`${operation} `.padEnd(width, '.')} ${percent(ratio)}`);
  if (authRatios.size === 0) return;
  const withinRound = rounds > 1 ? ' (median of the ratios within a round)' : '';
  console.log(
    `\nrowi with credentials and audit trail / rowi without authentication (bench only), requests/s, same run${withinRound}:`,
  );
  for (const [name, ratio] of authRatios) console.log(`  ${`${name} `.padEnd(width, '.')} ${percent(ratio)}`);
  if (limitRatios.size === 0) return;
  console.log(
    `\nrowi counting rate limits / rowi with rate limits off, ${RATE_LIMIT_OPERATION} with an API key + audit, requests/s, same run${withinRound}:`,
  );
  const where = {
    memory: 'in memory (per instance)',
    redis: `in Redis${redis.where === undefined ? '' : ` (${redis.where})`}`,
  };
  for (const counted of ['memory', 'redis']) {
    const ratio = limitRatios.get(counted);
    console.log(
      `  ${`${where[counted]} `.padEnd(width, '.')} ${ratio === undefined ? `skipped (${redis.skipped})` : percent(ratio)}`,
    );
  }
}

/**
 * Every goal measured in this run, one line each: ✓ or ✗, the goal, and the figure measured; a
 * goal whose targets were not loaded (--only, a skipped PostgreSQL or Redis) says so. Returns the
 * lines, for the record of the run.
 */
export function printGoals(results, ratios, authRatios, limitRatios, redis, storageWorkers, extra = []) {
  const lines = [];
  const add = (label, goal, met, figure) =>
    lines.push({ verdict: met === undefined ? '-' : met ? '✓' : '✗', label, goal, figure });
  const percent = (ratio) => `${(ratio * 100).toFixed(1)} %`;
  for (const goal of GOALS) {
    if (goal.idle !== undefined || goal.primary !== undefined) {
      const loads = results.filter(goal.idle ?? goal.primary);
      if (loads.length === 0) continue;
      const figure = goal.idle
        ? loads[0].server.idleRssMb
        : Math.max(loads[0].server.primaryIdleRssMb ?? 0, ...loads.map((result) => result.primaryRssMb ?? 0));
      add(goal.label, `<= ${goal.maxRssMb} MB`, figure <= goal.maxRssMb, `${figure.toFixed(0)} MB`);
      continue;
    }
    if (goal.rss !== undefined) {
      const loads = results.filter(goal.rss);
      if (loads.length === 0) continue;
      const peak = Math.max(...loads.map((result) => result.rssMb));
      add(goal.label, `<= ${goal.maxRssMb} MB`, peak <= goal.maxRssMb, `${peak.toFixed(0)} MB`);
      continue;
    }
    if (goal.speedUp !== undefined) {
      const ratio = storageWorkers['GET /v1/users/{id}']?.speedup_2_over_1_workers?.[goal.speedUp];
      if (ratio === undefined) continue;
      add(
        goal.label,
        `>= x${goal.minSpeedUp}`,
        ratio === null ? undefined : ratio >= goal.minSpeedUp,
        ratio === null ? 'not loaded' : `x${ratio.toFixed(2)}`,
      );
      continue;
    }
    if (goal.counted !== undefined) {
      if (!results.some((result) => result.limitsOff)) continue; // not loaded in this run
      const ratio = limitRatios.get(goal.counted);
      add(
        goal.label,
        `>= ${percent(goal.minRatioToLimitsOff)}`,
        ratio === undefined ? undefined : ratio >= goal.minRatioToLimitsOff,
        ratio === undefined ? `skipped (${redis.skipped})` : percent(ratio),
      );
      continue;
    }
    const result = results.find(goal.find);
    if (result === undefined) continue; // not loaded in this run
    if (goal.minRps !== undefined)
      add(
        goal.label,
        `>= ${goal.minRps} req/s`,
        result.rps >= goal.minRps,
        `${result.rps.toFixed(0)} req/s${result.rps >= goal.minRps ? '' : heldBy(result)}`,
      );
    if (goal.maxP99 !== undefined)
      add(goal.label, `p99 <= ${goal.maxP99} ms`, result.p99 <= goal.maxP99, `p99 ${result.p99.toFixed(2)} ms`);
    if (goal.minRatio !== undefined) {
      const ratio = ratios.get(goal.find === undefined ? undefined : result.operation);
      add(goal.label, `>= ${percent(goal.minRatio)} of bare req/s`, ratio >= goal.minRatio, percent(ratio));
    }
    if (goal.minRatioToNoAuth !== undefined) {
      const ratio = authRatios.get(result.name);
      add(
        goal.label,
        `>= ${percent(goal.minRatioToNoAuth)} of no-auth req/s`,
        ratio >= goal.minRatioToNoAuth,
        percent(ratio),
      );
    }
  }
  lines.push(...extra);
  if (lines.length === 0) return lines;
  const width = Math.max(...lines.map((line) => line.label.length)) + 2;
  const goalWidth = Math.max(...lines.map((line) => line.goal.length));
  console.log('\nTargets (docs/performance.md), measured in this run:');
  for (const line of lines)
    console.log(
      `  ${line.verdict} ${`${line.label} `.padEnd(width, '.')} ${line.goal.padEnd(goalWidth)}  measured: ${line.figure}`,
    );
  return lines;
}
