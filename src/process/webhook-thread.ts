import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { writeLockReleases } from '../db/sqlite-lock.js';
import type { Wakes } from '../outbox/outbox-worker.js';
import { faultOf } from '../observability/logger.js';
import { metrics } from '../observability/metrics.js';

/** The thread's entry, as built (dist/); running from the sources (the in-process tests) there is none. */
const ENTRY = new URL('./webhook-thread-entry.js', import.meta.url);
/** A thread that ended by itself is started again after this long. */
const RESTART_MS = 1000;

/** What the thread is handed when it starts. */
export interface WebhookThreadData {
  config: Config;
  userAgent: string;
  /** The process's name as the holder of the dispatcher's lease, which the thread holds on (outbox/webhook-standby.ts). */
  owner: string;
  /** The count of write transactions the process's SQLite connections ended (db/sqlite-lock.ts). */
  lockReleases: SharedArrayBuffer;
}

/**
 * Webhook delivery on a thread of its own (docs/events.md "Where webhooks are sent from"): the
 * dispatcher, its database work (a connection, or a small pool, of its own) and its HTTP requests
 * never take the event loop that answers requests. The thread is woken by this process's event
 * feed (new events committed here or by another process, the feed's poll), told in a message.
 * Answers how to start one (the event side starts it once an endpoint is enabled:
 * outbox/webhook-standby.ts), or undefined when ROWI_WEBHOOK_THREAD is `main`, and where it cannot
 * run: from the sources, and on an in-memory SQLite database, which exists on its one connection
 * only; delivery then runs on the main thread.
 */
export function webhookThreadStarter(
  config: Config,
  log: FastifyBaseLogger,
  userAgent: string,
): ((feed: Wakes, owner: string) => { close(): Promise<void> }) | undefined {
  if (
    config.webhookThread === 'main' ||
    !existsSync(fileURLToPath(ENTRY)) ||
    (config.databaseUrl === '' && config.data === ':memory:')
  )
    return undefined;
  return (feed, owner) => new WebhookThread({ config, userAgent, owner, lockReleases: writeLockReleases() }, log, feed);
}

class WebhookThread {
  readonly #data: WebhookThreadData;
  readonly #log: FastifyBaseLogger;
  readonly #unsubscribe: () => void;
  #worker: Worker;
  #closing = false;
  /** Whether the thread runs (between an end and its restart, none does). */
  #running = false;
  /** Whether a wake is posted and not yet sent: wakes in one turn of the event loop are one message. */
  #waking = false;

  constructor(data: WebhookThreadData, log: FastifyBaseLogger, feed: Wakes) {
    this.#data = data;
    this.#log = log;
    this.#worker = this.#start();
    this.#unsubscribe = feed.onWake(() => this.#wake());
  }

  #start(): Worker {
    const worker = new Worker(ENTRY, { workerData: this.#data });
    this.#running = true;
    metrics.webhookThreads.inc();
    worker.on('error', (error) => this.#log.error({ err: error }, `the webhook thread failed: ${faultOf(error)}`));
    worker.on('exit', (code) => {
      this.#running = false;
      metrics.webhookThreads.dec();
      if (this.#closing) return;
      this.#log.warn(`the webhook thread ended (${code}); it is started again in ${RESTART_MS} ms`);
      setTimeout(() => {
        if (!this.#closing) this.#worker = this.#start();
      }, RESTART_MS).unref();
    });
    return worker;
  }

  #wake(): void {
    if (this.#waking) return;
    this.#waking = true;
    setImmediate(() => {
      this.#waking = false;
      if (this.#running) this.#worker.postMessage('wake');
    });
  }

  /** Attempts in flight end (each within its time-out), their outcomes are written, the rest given back; then the thread ends. */
  async close(): Promise<void> {
    this.#closing = true;
    this.#unsubscribe();
    const worker = this.#worker;
    if (!this.#running) return;
    const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('close');
    const bound = setTimeout(() => void worker.terminate(), this.#data.config.webhookTimeout + 10_000);
    await ended;
    clearTimeout(bound);
  }
}
