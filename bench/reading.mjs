// npm run bench:reading
//
// The reading targets of issue 32 alone (docs/performance.md "Reading in bulk"): many items by id
// against single reads, and an order read with expand=user,lines.item against its plain read, on
// one rowi on SQLite (one process), over one kept-alive loopback connection, same run; each target
// with its ratio and ✓/✗, and the load average before and after (the machine may be shared).
// `npm run bench` measures the same on its main rowi (bench/lib/reading.mjs). Bounded: a fixed
// number of requests, each with a time-out.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminKeyOf, startRowi, stopServers } from './lib/processes.mjs';
import { measureReading, readingGoalLines } from './lib/reading.mjs';
import { HIGH_LIMITS } from './lib/rowi-env.mjs';

const bench = { work: mkdtempSync(join(tmpdir(), 'rowi-bench-reading-')), children: new Set() };
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

try {
  const server = await startRowi(bench, 'rowi-reading', {
    ...HIGH_LIMITS,
    ROWI_DATA: join(bench.work, 'rowi.db'),
    ROWI_PORT: '0',
    ROWI_WORKERS: '1',
    ROWI_LOG_LEVEL: 'info',
  });
  const key = await adminKeyOf(server);
  server.credentials = async () => ({ 'x-api-key': key });
  const before = load();
  const reading = await measureReading(server);
  console.log(`load average before ${before}, after ${load()} (1, 5, 15 min)`);
  for (const line of readingGoalLines(reading))
    console.log(`  ${line.verdict} ${line.label}: ${line.goal}, ${line.figure}`);
  if (readingGoalLines(reading).some((line) => line.verdict === '✗')) process.exitCode = 1;
} finally {
  await stopServers(bench);
  rmSync(bench.work, { recursive: true, force: true });
}
