import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { isCorruption } from '../db/driver-errors.js';
import { faultOf } from '../observability/logger.js';
import { anyEnabledEndpoint } from './webhook-endpoints.repository.js';
import { beatWebhookLease, holdsWebhookLease, skipWhileNoEndpoint, webhookLease } from './webhook-lease.js';

/** As often as the dispatcher's heartbeat: an endpoint enabled anywhere starts the thread within about a second. */
const BEAT_MS = 1000;
/** While the thread runs, whether an endpoint is still enabled is asked this often… */
const WATCH_MS = 2000;
/** …and the thread is stopped once none has been, or another process has held the lease, for this long. */
const IDLE_MS = 8000;

/** Webhook delivery started elsewhere (a thread of its own: process/webhook-thread.ts). */
export interface Dispatching {
  close(): Promise<void>;
}

/**
 * Webhook delivery on a thread of its own, started only while there is something to deliver
 * (docs/events.md): a thread costs every process about 38 MB. Until an endpoint is enabled, this
 * process competes for the dispatcher's lease on its main thread as the dispatcher would, and while
 * it holds it keeps the webhooks' cursor at the outbox's end (nobody is to get those events), so the
 * dispatcher never starts behind. Once it holds the lease and an endpoint is enabled (created
 * through any process or instance), it starts the thread, whose dispatcher holds the lease under
 * the same name: no takeover, no wait. Only the lease holder starts one. Once no endpoint has been
 * enabled, or another process has held the lease, for IDLE_MS, the thread is stopped (its memory
 * goes back to the system) and this stands in for it again.
 */
export class WebhookStandby {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #owner: string;
  readonly #start: () => Dispatching;
  readonly #lease;
  readonly #timer: NodeJS.Timeout;
  #thread: Dispatching | undefined;
  #beating: Promise<void> | undefined;
  #watchedAt = 0;
  /** Since when the thread has not been needed (no endpoint enabled, or the lease another's). */
  #idleSince: number | undefined;
  #failing = false;
  #closed = false;

  constructor(db: Db, log: FastifyBaseLogger, owner: string, start: () => Dispatching) {
    this.#db = db;
    this.#log = log;
    this.#owner = owner;
    this.#start = start;
    this.#lease = webhookLease(db, owner);
    this.#timer = setInterval(() => this.#beat(), BEAT_MS);
    this.#timer.unref();
    this.#beat();
  }

  /** Stops the beats, and the thread if it runs (attempts in flight end, their outcomes are written). */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#beating;
    await this.#thread?.close();
  }

  #beat(): void {
    if (this.#beating !== undefined || this.#closed) return;
    this.#beating = (this.#thread === undefined ? this.#stand() : this.#watch())
      .then(
        () => {
          this.#failing = false;
        },
        (error: unknown) => {
          // Said once while it lasts (damage is logged where it is found, db/corruption.ts).
          if (!this.#failing && !isCorruption(error))
            this.#db.outage.failed(
              this.#log,
              'webhook-standby',
              error,
              `webhook standby failed: ${faultOf(error)}; trying again`,
            );
          this.#failing = true;
        },
      )
      .finally(() => {
        this.#beating = undefined;
      });
  }

  /** No thread: the lease held, the events nobody is to get passed over; the thread started once an endpoint is enabled. */
  async #stand(): Promise<void> {
    if (!(await beatWebhookLease(this.#db, this.#lease))) return;
    if (!(await skipWhileNoEndpoint(this.#db, this.#owner)) || this.#closed) return;
    this.#thread = this.#start();
    this.#watchedAt = Date.now();
    this.#idleSince = undefined;
    this.#log.info('webhook thread started: an endpoint is enabled');
  }

  /** The thread runs: stopped once no endpoint has been enabled, or another process has held the lease (it delivers), for IDLE_MS. */
  async #watch(): Promise<void> {
    if (Date.now() - this.#watchedAt < WATCH_MS) return;
    this.#watchedAt = Date.now();
    if ((await anyEnabledEndpoint(this.#db)) && (await holdsWebhookLease(this.#db, this.#owner))) {
      this.#idleSince = undefined;
      return;
    }
    this.#idleSince ??= this.#watchedAt;
    if (this.#watchedAt - this.#idleSince < IDLE_MS || this.#closed) return;
    const thread = this.#thread!;
    this.#thread = undefined;
    await thread.close();
    this.#log.info(
      `webhook thread stopped: no endpoint enabled, or another process delivering, for ${IDLE_MS / 1000} s`,
    );
  }
}
