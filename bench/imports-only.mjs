// The import targets alone (docs/performance.md "Imports"): a rowi on a fresh SQLite file, 1,000
// users (the GET probe among them), then measureImports as `npm run bench` runs it, for the row
// counts given (--rows 100000,1000000; default 100,000 only), on SQLite only (npm run bench measures
// PostgreSQL too).
// For profiling the import: ROWI_BENCH_CPU_PROF=<folder> starts rowi with --cpu-prof there.
// npm run bench:imports [-- --rows 100000 --dist dist-before]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { importGoalLines, measureImports } from './lib/imports.mjs';
import { ROOT, adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { sqliteEnv } from './lib/rowi-env.mjs';
import { seedUsers } from './lib/setup.mjs';

const { values: options } = parseArgs({
  options: {
    rows: { type: 'string', default: '100000' },
    // Another build to measure (a baseline built with tsc --outDir): its folder, beside dist/.
    dist: { type: 'string', default: 'dist' },
  },
});
const rowCounts = options.rows.split(',').map(Number);
const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-imports-')), children: new Set(), pgSchemaCreated: false };
const profile = process.env.ROWI_BENCH_CPU_PROF;
try {
  const serve = [join(ROOT, options.dist, 'src/process/cli.js'), 'serve'];
  const args = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`, ...serve] : serve;
  const rowi = await startRowi(bench, 'rowi', sqliteEnv(join(bench.work, 'rowi.db'), 1), args);
  const adminKey = await adminKeyOf(rowi);
  rowi.credentials = async () => ({ 'x-api-key': adminKey });
  const users = await seedUsers(rowi, 1000);
  const probePath = `/v1/users/${users[500].id}`;
  console.log(
    `load average before: ${loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}`,
  );
  const results = await measureImports({
    sqlite: rowi,
    folder: bench.work,
    probePath,
    rowCounts,
  });
  console.log(
    `load average after: ${loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}`,
  );
  for (const line of importGoalLines(results))
    console.log(`${line.verdict} ${line.label}: ${line.figure} (goal ${line.goal})`);
} finally {
  // A profile is written when rowi ends gracefully.
  if (profile)
    for (const child of bench.children) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
}
