import type { FastifyBaseLogger } from 'fastify';
import type { Db, Trx } from '../db/database.js';
import { isCorruption } from '../db/driver-errors.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { deleteDeliveriesBefore } from './deliveries.repository.js';
import { deleteEventsBefore } from './outbox.repository.js';
import { firstEventIdAt } from './event-ids.js';

const PRUNE_EVERY_MS = 60_000;
/** Rows one statement deletes at most: a short transaction, so writers never wait long behind it. */
const BATCH = 500;
/** Batches one sweep deletes at most before it waits for the next. */
const MAX_BATCHES = 200;

/**
 * Deletes events and webhook deliveries older than the retention, in the background: small
 * batches, each its own short transaction, with a turn of the event loop between them, so a
 * sweep never stalls requests. Returns the stop function.
 */
export function startPruning(db: Db, retentionSeconds: number, log: FastifyBaseLogger): () => void {
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      const cutoff = new Date(Date.now() - retentionSeconds * 1000).toISOString();
      let deleted = 0;
      const prunes = [
        (trx: Trx) => deleteEventsBefore(trx, firstEventIdAt(cutoff), BATCH),
        (trx: Trx) => deleteDeliveriesBefore(trx, cutoff, BATCH),
      ];
      for (const prune of prunes) {
        for (let batch = 0; batch < MAX_BATCHES; batch++) {
          const count = await unitOfWork(db, prune);
          deleted += count;
          if (count < BATCH) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      if (deleted > 0)
        log.info({ deleted, before: cutoff }, 'pruned events and webhook deliveries past their retention');
    } catch (error) {
      if (!isCorruption(error)) log.warn({ err: error }, 'could not prune old events');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), PRUNE_EVERY_MS);
  timer.unref();
  const first = setTimeout(() => void sweep(), 1000);
  first.unref();
  return () => {
    clearInterval(timer);
    clearTimeout(first);
  };
}
