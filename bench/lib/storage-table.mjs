// "Storage and processes": rowi with an API key + audit on SQLite and PostgreSQL, with 1 and 2
// worker processes, side by side, from the results of the same run.
import { pairedRatio } from './report.mjs';
import { STORAGE_COLUMNS, STORAGE_OPERATIONS, columnOf } from './targets.mjs';

/**
 * Per operation loaded: for each column, rowi's figures and its ratio over the baseline (or why it
 * is missing), and for each storage the 2-worker/1-worker speed-up of requests/s (median of the
 * ratios within a round, as the other ratios).
 */
export function storageTableOf(results, samples, postgres) {
  const table = {};
  for (const operation of STORAGE_OPERATIONS) {
    const found = STORAGE_COLUMNS.map((column) =>
      results.find(
        (result) =>
          result.operation === operation &&
          result.credential === 'API key' &&
          result.storage === column.storage &&
          result.workers === column.workers,
      ),
    );
    if (found[0] === undefined) continue; // not loaded in this run (--only)
    const row = {};
    STORAGE_COLUMNS.forEach((column, index) => {
      const result = found[index];
      row[columnOf(column)] =
        result === undefined
          ? { skipped: column.storage === 'PostgreSQL' ? postgres.skipped : 'not loaded' }
          : {
              rps: result.rps,
              p50_ms: result.p50,
              p99_ms: result.p99,
              peak_rss_mb: result.rssMb,
              ratio_over_bare: pairedRatio(samples, result.name, result.baseline),
            };
    });
    row.speedup_2_over_1_workers = {};
    for (const storage of ['SQLite', 'PostgreSQL']) {
      const [one, two] = [1, 2].map(
        (workers) =>
          found[STORAGE_COLUMNS.findIndex((column) => column.storage === storage && column.workers === workers)],
      );
      row.speedup_2_over_1_workers[storage] = one && two ? pairedRatio(samples, two.name, one.name) : null;
    }
    table[operation] = row;
  }
  return table;
}

export function printStorageTable(rounds, table, postgres) {
  const operations = Object.keys(table);
  if (operations.length === 0) return;
  const titles = STORAGE_COLUMNS.map(columnOf);
  const cell = (figures) =>
    figures.rps === undefined ? 'skipped' : `${figures.rps.toFixed(0)} (${figures.p99.toFixed(2)})`;
  const rows = operations.map((operation) => [
    operation,
    ...titles.map((title) => cell({ ...table[operation][title], p99: table[operation][title].p99_ms })),
  ]);
  const header = ['request', ...titles];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) =>
    cells
      .map((text, column) => (column === 0 ? text.padEnd(widths[column]) : text.padStart(widths[column])))
      .join('  ');
  console.log(`\nStorage and processes (same run): rowi with an API key + audit, req/s (p99 ms)`);
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  const speedUp = (ratio) => (ratio === null ? 'skipped' : `x${ratio.toFixed(2)}`);
  const speedUps = operations.map(
    (operation) =>
      `${operation}: ${Object.entries(table[operation].speedup_2_over_1_workers)
        .map(([storage, ratio]) => `${storage} ${speedUp(ratio)}`)
        .join(', ')}`,
  );
  console.log(
    `2 workers / 1 worker, req/s${rounds > 1 ? ' (median of the ratios within a round)' : ''}: ${speedUps.join('; ')}`,
  );
  if (postgres.skipped !== undefined) console.log(`PostgreSQL skipped: ${postgres.skipped}`);
}
