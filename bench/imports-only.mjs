// The import targets alone (bench/NOTES.md "Imports"): a rowi on a fresh SQLite file, 1,000
// users (the GET probe among them), then measureImports as `npm run bench` runs it, for the row
// counts given (--rows 100000,1000000; default 100,000 only; each import bounded in time).
// --postgres: the same imports on a rowi on PostgreSQL too (ROWI_BENCH_PG_URL, else
// ROWI_TEST_PG_URL, else postgres://postgres@127.0.0.1:5432/test), in a schema the run creates and
// drops. --baseline <folder>: another build's dist/ (absolute, or from this checkout) on a SQLite
// file of its own, its imports alternated with this build's for --rounds rounds (ABBA order), and
// the medians of the two compared: CPU time a row (rowi's, from /proc) is the figure that another
// load on the machine moves least.
// For profiling the import: ROWI_BENCH_CPU_PROF=<folder> starts every rowi with --cpu-prof there.
// npm run bench:imports [-- --rows 100000 --postgres --baseline .bench/dist-main --rounds 3]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { importGoalLines, measureImports } from './lib/imports.mjs';
import { createBenchSchema, dropBenchSchema } from './lib/postgres.mjs';
import { ROOT, adminKeyOf, cliOf, startRowi, stopServers } from './lib/processes.mjs';
import { postgresEnv, sqliteEnv } from './lib/rowi-env.mjs';
import { seedUsers } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    rows: { type: 'string', default: '100000' },
    // The build to measure, and another to compare it with: folders beside dist/.
    dist: { type: 'string', default: 'dist' },
    baseline: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    postgres: { type: 'boolean', default: false },
  },
});
const rowCounts = options.rows.split(',').map(Number);
const rounds = Number(options.rounds);
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-imports-')), children: new Set(), pgSchemaCreated: false };
const profile = process.env.ROWI_BENCH_CPU_PROF;
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

async function startBuild(label, dist, env) {
  const serve = [cliOf(resolve(ROOT, dist)), 'serve'];
  const args = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`, ...serve] : serve;
  const rowi = await startRowi(bench, label.replace(/\W+/g, '-'), env, args);
  const adminKey = await adminKeyOf(rowi);
  rowi.credentials = async () => ({ 'x-api-key': adminKey });
  rowi.label = label;
  return rowi;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];

try {
  const builds = [{ label: `this build (${options.dist})`, dist: options.dist }];
  if (options.baseline) builds.push({ label: `baseline (${options.baseline})`, dist: options.baseline });
  for (const [index, build] of builds.entries()) {
    build.rowi = await startBuild(build.label, build.dist, sqliteEnv(join(bench.work, `rowi-${index}.db`), 1));
    const users = await seedUsers(build.rowi, 1000);
    build.probePath = `/v1/users/${users[500].id}`;
    build.results = [];
  }
  console.log(`load average before: ${load()}`);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? builds : [...builds].reverse();
    for (const build of order) {
      const results = await measureImports({
        sqlite: build.rowi,
        folder: bench.work,
        probePath: build.probePath,
        rowCounts,
      });
      build.results.push(results);
      console.log(`round ${round + 1}, ${build.label} (load average ${load()}):`);
      for (const line of importGoalLines(results))
        console.log(`  ${line.verdict} ${line.label}: ${line.figure} (goal ${line.goal})`);
    }
  }
  if (builds.length > 1) {
    console.log(`same run, medians of ${rounds} rounds (this build / baseline):`);
    for (const [position, rows] of rowCounts.entries()) {
      const figures = builds.map((build) => {
        const runs = build.results.map((results) => results.sqlite[position]);
        return {
          cpuUs: median(runs.map((run) => (run.cpu_s / run.rows) * 1e6)),
          rate: median(runs.map((run) => run.rows_per_s)),
        };
      });
      const [now, before] = figures;
      console.log(
        `  ${rows.toLocaleString('en')} rows: CPU ${now.cpuUs.toFixed(1)} / ${before.cpuUs.toFixed(1)} µs a row (${(now.cpuUs / before.cpuUs).toFixed(2)}×), ` +
          `${now.rate.toFixed(0)} / ${before.rate.toFixed(0)} rows/s (${(now.rate / before.rate).toFixed(2)}×)`,
      );
    }
  }
  if (builds.length > 1 && builds[0].results[0].beside) {
    const [now, before] = builds.map((build) => ({
      rate: median(build.results.map((results) => results.beside.rows_per_s)),
      p99: median(build.results.map((results) => results.get.p99)),
    }));
    console.log(
      `  ${rowCounts[0].toLocaleString('en')} rows with the GET alongside: ${now.rate.toFixed(0)} / ${before.rate.toFixed(0)} rows/s (${(now.rate / before.rate).toFixed(2)}×), the GET's p99 ${now.p99.toFixed(1)} / ${before.p99.toFixed(1)} ms`,
    );
  }
  if (options.postgres) {
    const url = await createBenchSchema(bench);
    if (url.skipped) console.log(`✗ PostgreSQL not measured: ${url.skipped}`);
    else {
      const rowi = await startBuild(`${builds[0].label} on PostgreSQL`, builds[0].dist, postgresEnv(url.toString(), 1));
      await seedUsers(rowi, 1000);
      const results = await measureImports({ postgres: rowi, folder: bench.work, rowCounts });
      console.log(`PostgreSQL (${url.host}, schema of this run; load average ${load()}):`);
      for (const line of importGoalLines(results))
        console.log(`  ${line.verdict} ${line.label}: ${line.figure} (goal ${line.goal})`);
    }
  }
  console.log(`load average after: ${load()}`);
} finally {
  // A profile is written when rowi ends gracefully.
  if (profile)
    for (const child of bench.children) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  await stopServers(bench);
  await dropBenchSchema(bench);
  rmSync(bench.work, { recursive: true, force: true });
}
