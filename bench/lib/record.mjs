// The record of a run, in bench/results/: latest.json for a whole run, partial.json for one
// limited by --only (so that it does not replace the record of a whole one).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { STOCK_PER_ITEM } from './order-mix.mjs';
import { PG_SCHEMA } from './postgres.mjs';
import { ROOT } from './processes.mjs';
import { HIGH_LIMITS } from './rowi-env.mjs';

export function writeRecord({
  only,
  tool,
  bench,
  duration,
  rounds,
  mix,
  results,
  ratios,
  authRatios,
  limitRatios,
  limitsOff,
  redis,
  redisFellBack,
  storageWorkers,
  postgres,
  goals,
  driverRatios,
  drivers,
  batch,
  imports,
  reading,
}) {
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const record = {
    at: new Date().toISOString(),
    tool,
    connections: bench.connections,
    threads: bench.threads,
    duration_s: duration,
    rounds,
    node: process.version,
    order_mix: { items: mix.itemIds.length, lines: `1-${mix.maxLines}`, quantity: 1, stock_per_item: STOCK_PER_ITEM },
    // loop_delay_p99_ms: the worst p99 of the event loop's delay over the server's processes during the load (null: the baseline).
    results: results.map(({ name, rps, p50, p99, rssMb, loopP99, loopMax }) => ({
      name,
      rps,
      p50_ms: p50,
      p99_ms: p99,
      peak_rss_mb: rssMb,
      loop_delay_p99_ms: loopP99,
      loop_delay_max_ms: loopMax,
    })),
    // Every target of docs/performance.md with what this run measured: ✓ met, ✗ missed, - not measurable here.
    goals: goals.map(({ verdict, label, goal, figure }) => ({
      met: verdict === '✓' ? true : verdict === '✗' ? false : null,
      target: label,
      goal,
      measured: figure,
    })),
    // node:sqlite (Node 24) over better-sqlite3 (Node 20), requests/s, same run.
    sqlite_drivers:
      drivers.skipped === undefined
        ? {
            node_sqlite_over_better_sqlite3: driverRatios,
            nodes: drivers.servers.map((server) => ({ driver: server.driver, node: server.version })),
          }
        : { skipped: drivers.skipped },
    // GET /v1/users/{id}'s ratio under its old name, so earlier records compare with this one.
    ratio_rowi_over_bare: ratios.get('GET /v1/users/{id}'),
    ratios_rowi_over_bare: Object.fromEntries(ratios),
    // rowi-auth with credentials and the audit trail over the same app without them (bench only).
    ratios_auth_over_no_auth: Object.fromEntries(authRatios),
    // GET /v1/users/{id}: rowi counting rate limits (memory: per instance; redis: in Redis) over the
    // same rowi with every limit off, same run; null: that column was skipped.
    ratios_rate_limit_over_off:
      limitsOff === undefined
        ? {}
        : { memory: limitRatios.get('memory') ?? null, redis: limitRatios.get('redis') ?? null },
    rate_limits: {
      limits: Object.fromEntries(Object.entries(HIGH_LIMITS).filter(([name]) => name !== 'ROWI_REDIS_URL')),
      redis:
        redis.skipped === undefined
          ? { url: redis.where, unreachable_logged: redisFellBack }
          : { skipped: redis.skipped },
    },
    // rowi (API key + audit) per storage and number of worker processes, same run; per operation,
    // per column: req/s, p50, p99, peak RSS (summed over the processes), ratio over the baseline;
    // and the 2-worker/1-worker speed-up of each storage.
    storage_workers: storageWorkers,
    // 1,000 stock levels in one POST /v1/items/stock/batch over the same 1,000 single PUTs on one
    // kept-alive connection, same rowi, same run (median of its rounds); null: not run (--only).
    batch_over_single_puts: batch ?? null,
    // Items imported from CSV (rows/s, RSS growth) on SQLite and PostgreSQL, and GET /v1/users/{id} alongside (bench/lib/imports.mjs).
    imports: imports ?? null,
    // 100 items by ?id= over 100 single reads, and an order read with expand= over its plain read (bench/lib/reading.mjs).
    reading: reading ?? null,
    postgres:
      postgres.skipped === undefined
        ? { database: postgres.where, schema: PG_SCHEMA, order_mix: { items: postgres.mix.itemIds.length } }
        : { skipped: postgres.skipped },
  };
  writeFileSync(
    join(ROOT, `bench/results/${only === '' ? 'latest' : 'partial'}.json`),
    `${JSON.stringify(record, null, 2)}\n`,
  );
}
