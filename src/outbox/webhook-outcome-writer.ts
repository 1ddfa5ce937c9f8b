/**
 * The webhook dispatcher's outcomes, written together: each attempt's outcome joins the others, and
 * they are written in one unit of work with the claims let go, off the path of the next delivery.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { unitOfWork } from '../db/unit-of-work.js';
import { faultOf } from '../observability/logger.js';
import { releaseDeliveries } from './deliveries.repository.js';
import { goesOn, recordTurns, type OutcomeRules, type SettledTurn } from './delivery-outcomes.js';
import { ownResource, type Lanes } from './webhook-lanes.js';

/** Outcomes are written together, at most this long after their attempt ended, or once this many wait. */
const OUTCOMES_MS = 50;
const OUTCOME_BATCH = 500;

export interface OutcomeWriterOptions {
  db: Db;
  log: FastifyBaseLogger;
  rules: OutcomeRules;
  /** The dispatcher's name as the holder of the lease, whose claims are given back. */
  owner: string;
  lanes: Lanes;
  /** Whether the dispatcher closes: an outcome it cannot write then is logged, not tried again. */
  closed(): boolean;
  /** Wakes the dispatcher once outcomes are written: the deliveries they held back may go. */
  wake(): void;
}

export class OutcomeWriter {
  readonly #options: OutcomeWriterOptions;
  #outcomes: SettledTurn[] = [];
  /** The outcomes being written now. */
  #writingTurns: readonly SettledTurn[] = [];
  #writing: Promise<void> | undefined;
  #writeTimer: NodeJS.Timeout | undefined;

  constructor(options: OutcomeWriterOptions) {
    this.#options = options;
  }

  record(turn: SettledTurn): void {
    this.#outcomes.push(turn);
    this.#options.lanes.unwritten.add(turn.delivery.id);
    if (this.#outcomes.length >= OUTCOME_BATCH) void this.write();
    else this.writeSoon();
  }

  /** The resources of an endpoint with a failed delivery whose outcome is not written yet. */
  failing(endpointId: number): Set<string> {
    const keys = new Set<string>();
    for (const turn of [...this.#outcomes, ...this.#writingTurns])
      if (!goesOn(turn) && turn.delivery.endpoint_id === endpointId) keys.add(ownResource(turn.delivery));
    return keys;
  }

  writeSoon(): void {
    if (this.#writeTimer !== undefined) return;
    this.#writeTimer = setTimeout(() => void this.write(), OUTCOMES_MS);
  }

  /** Writes the outcomes waiting (and gives back the deliveries let go), in one unit of work; one write at a time. */
  async write(): Promise<void> {
    const { db, log, rules, owner, lanes } = this.#options;
    clearTimeout(this.#writeTimer);
    this.#writeTimer = undefined;
    while (this.#writing) await this.#writing;
    const turns = this.#outcomes;
    const release = lanes.takeRelease();
    if (turns.length === 0 && release.length === 0) return;
    this.#outcomes = [];
    this.#writingTurns = turns;
    this.#writing = (async () => {
      try {
        const disabled = await unitOfWork(db, async (trx) => {
          await releaseDeliveries(trx, release, owner);
          return recordTurns(trx, turns, rules, log);
        });
        lanes.written(release, turns);
        for (const id of disabled) lanes.disable(id);
        this.#options.wake();
      } catch (error) {
        if (this.#options.closed()) {
          log.warn({ err: error }, `webhook outcomes could not be written: ${faultOf(error)}`);
          return;
        }
        // Written with the next ones, a second later; meanwhile their deliveries stay claimed.
        this.#outcomes.unshift(...turns);
        lanes.releaseLater(release);
        db.outage.failed(
          log,
          'webhook-outcomes',
          error,
          `webhook outcomes could not be written: ${faultOf(error)}; trying again`,
        );
        setTimeout(() => this.writeSoon(), 1000).unref();
      } finally {
        this.#writing = undefined;
        this.#writingTurns = [];
      }
    })();
    await this.#writing;
  }
}
