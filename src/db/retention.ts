import type { FastifyBaseLogger } from 'fastify';
import { metrics } from '../observability/metrics.js';
import type { Db, Trx } from './database.js';
import { isCorruption } from './driver-errors.js';
import { estimateTable, type TableShape } from './retention.repository.js';
import { unitOfWork } from './unit-of-work.js';

/**
 * A table that grows with use and is kept for a while (docs/operations.md "Data kept and its
 * retention"): the audit trail, events, webhook deliveries, Idempotency-Key records. Each layer
 * describes its own tables; app.ts hands the list to startRetention, and a new table joins with
 * one more entry in that list.
 */
export interface RetainedTable extends TableShape {
  /**
   * Seconds a row is kept: the pruner deletes rows older than now minus this. 0: the row carries
   * its own end (an Idempotency-Key's expires_at) and `prune` is given now.
   */
  retentionSeconds: number;
  /**
   * Deletes at most `limit` of the rows past `cutoff` (RFC 3339), the oldest first, in `trx`; how
   * many it deleted. Undefined for a table whose rows go with another's (webhook attempts with
   * their delivery, by foreign key): it is only measured.
   */
  prune?: (trx: Trx, cutoff: string, limit: number) => Promise<number>;
}

export interface RetentionOptions {
  /** Milliseconds between sweeps. */
  everyMs: number;
  /** Rows one batch deletes at most: one short transaction, so writers never wait long behind it. */
  batch: number;
  /** Milliseconds between two batches of a backlog: requests and writers get their turns between. */
  pauseMs: number;
}

export const RETENTION_DEFAULTS: RetentionOptions = { everyMs: 60_000, batch: 500, pauseMs: 5 };

export interface Retention {
  /** One sweep now (the tests', and the first one after start): prunes every table, then measures them. */
  sweep(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Prunes every table in the background, each in batches of `batch` rows, each batch its own unit
 * of work (on SQLite a savepoint of a group commit that holds the write lock a few milliseconds),
 * with `pauseMs` between batches: a backlog of millions of rows is worked off at tens of
 * thousands a second without stalling requests, and a sweep goes on until the backlog is gone.
 *
 * Pruning is idempotent (each batch deletes what is past the cutoff and still there), so every
 * process of `--workers` and every instance on one PostgreSQL may run it: two that meet delete
 * each row once, and the one that finds the rows gone ends its sweep. After each sweep the
 * tables are measured (rows estimated from the key range, the oldest row's time) into the
 * gauges of metrics.ts: a scrape reads those numbers and never counts a table.
 */
export function startRetention(
  db: Db,
  tables: readonly RetainedTable[],
  log: FastifyBaseLogger,
  options: RetentionOptions = RETENTION_DEFAULTS,
): Retention {
  let stopped = false;
  let running: Promise<void> | undefined;
  const pruneTable = async (table: RetainedTable, prune: NonNullable<RetainedTable['prune']>) => {
    const cutoff = new Date(Date.now() - table.retentionSeconds * 1000).toISOString();
    let deleted = 0;
    while (!stopped) {
      const count = await unitOfWork(db, (trx) => prune(trx, cutoff, options.batch));
      deleted += count;
      metrics.prunedRows.inc({ table: table.table }, count);
      if (count < options.batch) break;
      await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
    if (deleted > 0) log.info({ table: table.table, deleted, before: cutoff }, 'pruned rows past their retention');
  };
  const sweepOnce = async () => {
    for (const table of tables) {
      if (stopped) return;
      try {
        if (table.prune !== undefined) await pruneTable(table, table.prune);
        const { rows, oldest } = await estimateTable(db, table);
        metrics.tableRows.set({ table: table.table }, rows);
        if (oldest === null) metrics.oldestRowTime.remove({ table: table.table });
        else metrics.oldestRowTime.set({ table: table.table }, Date.parse(oldest) / 1000);
      } catch (error) {
        if (!isCorruption(error))
          db.outage.failed(log, 'retention', error, `could not prune or measure the table ${table.table}`);
      }
    }
  };
  /** Waits for a sweep under way, then runs a whole one (so rows older than the call are all considered). */
  const sweep = async () => {
    while (running !== undefined) await running;
    running = sweepOnce().finally(() => (running = undefined));
    return running;
  };
  const sweepUnlessRunning = () => {
    if (running === undefined) void sweep();
  };
  const timer = setInterval(sweepUnlessRunning, options.everyMs);
  timer.unref();
  const first = setTimeout(sweepUnlessRunning, 1000);
  first.unref();
  return {
    sweep,
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(first);
      await running;
    },
  };
}
