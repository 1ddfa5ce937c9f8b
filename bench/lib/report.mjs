// What a run prints: the table of targets, the ratios measured within the run, and the goals.
import { RATE_LIMIT_OPERATION, columnOf, isReference } from './targets.mjs';

// What rowi must reach (README); the ratio targets are against the baseline of the same run.
// minRatio is over the bare baseline; minRatioToNoAuth over rowi without authentication (issue 4).
const GOALS = [
  { operation: 'GET /v1/users/{id}', minRatio: 0.5, maxP99: 10 },
  { operation: 'GET /v1/users/{id}', credential: 'API key', minRatioToNoAuth: 0.85 },
  { operation: 'GET /v1/users/{id}', credential: 'JWT', minRatioToNoAuth: 0.85 },
  { operation: 'POST /v1/orders', minRps: 2000, maxP99: 50 },
  // The overhead of rate limiting over the same rowi with every limit off (issue: ≤ 5 % in memory, ≤ 15 % with Redis).
  { operation: 'GET /v1/users/{id}', credential: 'API key', counted: 'memory', minRatioToLimitsOff: 0.95 },
  { operation: 'GET /v1/users/{id}', credential: 'API key', counted: 'redis', minRatioToLimitsOff: 0.85 },
];

export function printTable(results) {
  const rows = results.map((result) => [result.label, result.operation, result.rps.toFixed(0), result.p50.toFixed(2), result.p99.toFixed(2), result.rssMb.toFixed(0)]);
  const header = ['target', 'request', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column < 2 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ');
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
  const ratios = samples.get(name).map((run, round) => run.rps / samples.get(over)[round].rps).sort((a, b) => a - b);
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
  console.log(`\nrowi/bare requests/s, same run${rounds > 1 ? ` (median over ${rounds} rounds of the ratio within a round)` : ''}:`);
  for (const [operation, ratio] of ratios) console.log(`  ${`${operation} `.padEnd(width, '.')} ${percent(ratio)}`);
  if (authRatios.size === 0) return;
  const withinRound = rounds > 1 ? ' (median of the ratios within a round)' : '';
  console.log(`\nrowi with credentials and audit trail / rowi without authentication (bench only), requests/s, same run${withinRound}:`);
  for (const [name, ratio] of authRatios) console.log(`  ${`${name} `.padEnd(width, '.')} ${percent(ratio)}`);
  if (limitRatios.size === 0) return;
  console.log(`\nrowi counting rate limits / rowi with rate limits off, ${RATE_LIMIT_OPERATION} with an API key + audit, requests/s, same run${withinRound}:`);
  const where = { memory: 'in memory (per instance)', redis: `in Redis${redis.where === undefined ? '' : ` (${redis.where})`}` };
  for (const counted of ['memory', 'redis']) {
    const ratio = limitRatios.get(counted);
    console.log(`  ${`${where[counted]} `.padEnd(width, '.')} ${ratio === undefined ? `skipped (${redis.skipped})` : percent(ratio)}`);
  }
}

export function printGoals(results, ratios, authRatios, limitRatios, redis) {
  const lines = [];
  for (const goal of GOALS) {
    const credential = goal.credential ?? 'API key';
    // A goal over no authentication is of the auth comparison's target (rowi-auth); any other of the main rowi's.
    const measured = goal.minRatioToNoAuth === undefined ? isReference : (result) => result.noAuth !== undefined;
    const rowiResult = results.find((result) => result.operation === goal.operation && result.credential === credential && measured(result));
    if (rowiResult === undefined) continue; // not loaded in this run (--only)
    const check = (label, met, figure) => lines.push({ label: `target: ${goal.operation} rowi ${goal.credential ? `${goal.credential} + audit ` : ''}${label} `, verdict: met ? 'PASS' : 'MISS', figure });
    if (goal.minRatioToLimitsOff !== undefined) {
      if (!results.some((result) => result.limitsOff)) continue; // not loaded in this run
      const label = `target: ${goal.operation} rowi ${goal.credential} + audit, rate limits ${goal.counted === 'redis' ? 'in Redis' : 'in memory'} >= ${goal.minRatioToLimitsOff * 100} % of limits-off req/s `;
      const ratio = limitRatios.get(goal.counted);
      lines.push(ratio === undefined
        ? { label, verdict: 'SKIP', figure: redis.skipped }
        : { label, verdict: ratio >= goal.minRatioToLimitsOff ? 'PASS' : 'MISS', figure: `${(ratio * 100).toFixed(1)} %` });
      continue;
    }
    if (goal.minRatioToNoAuth !== undefined) {
      const ratio = authRatios.get(rowiResult.name);
      check(`>= ${goal.minRatioToNoAuth * 100} % of no-auth req/s`, ratio >= goal.minRatioToNoAuth, `${(ratio * 100).toFixed(1)} %`);
    }
    if (goal.minRatio !== undefined) {
      const ratio = ratios.get(goal.operation);
      check(`>= ${goal.minRatio * 100} % of bare req/s`, ratio >= goal.minRatio, `${(ratio * 100).toFixed(1)} %`);
    }
    if (goal.minRps !== undefined) check(`>= ${goal.minRps} req/s`, rowiResult.rps >= goal.minRps, `${rowiResult.rps.toFixed(0)} req/s`);
    if (goal.maxP99 !== undefined) check(`p99 < ${goal.maxP99} ms`, rowiResult.p99 < goal.maxP99, `${rowiResult.p99.toFixed(2)} ms`);
  }
  const width = Math.max(...lines.map((line) => line.label.length)) + 3;
  for (const line of lines) console.log(`${line.label.padEnd(width, '.')} ${line.verdict} (${line.figure})`);
}
