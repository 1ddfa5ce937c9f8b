import cluster from 'node:cluster';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { faultOf } from '../observability/logger.js';

/**
 * Word between the rowi processes that share one database: "topic changed, forget what you
 * believed about it". In-process caches (credentials, signing keys) subscribe; whatever changes
 * them publishes after its transaction commits. Every subscriber also hears its own process's
 * messages. Delivery is prompt but not guaranteed (a listener may be reconnecting), so caches
 * still bound how long they believe an entry; when a listener was cut off and is back, it hears
 * EVERYTHING, since it cannot know what it missed.
 *
 * - PostgreSQL: LISTEN/NOTIFY on a channel named after the schema, so instances on one database
 *   and schema hear each other and nobody else.
 * - SQLite with `rowi serve --workers N`: the cluster's IPC channel, relayed by the primary.
 * - SQLite in one process: delivered in-process.
 */
export interface Signals {
  publish(topic: string): Promise<void>;
  subscribe(handler: (topic: string) => void): () => void;
  close(): Promise<void>;
}

/** Heard after a listener reconnects: every topic may have changed. */
export const EVERYTHING = '*';

const IPC_TYPE = 'rowi:signal';

class Handlers {
  readonly #handlers = new Set<(topic: string) => void>();

  add(handler: (topic: string) => void): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  deliver(topic: string): void {
    for (const handler of this.#handlers) handler(topic);
  }
}

/** In one process, or between the workers of one `rowi serve --workers N` (SQLite). */
export function processSignals(): Signals {
  const handlers = new Handlers();
  const worker = cluster.isWorker && typeof process.send === 'function';
  const onMessage = (message: unknown) => {
    if (isSignal(message)) handlers.deliver(message.topic);
  };
  if (worker) process.on('message', onMessage);
  return {
    async publish(topic) {
      // The primary relays to every worker, this one included (relayWorkerSignals).
      if (worker) process.send!({ type: IPC_TYPE, topic });
      else queueMicrotask(() => handlers.deliver(topic));
    },
    subscribe: (handler) => handlers.add(handler),
    async close() {
      if (worker) process.off('message', onMessage);
    },
  };
}

/** In the primary of `rowi serve --workers N`: passes each worker's signal on to all workers. */
export function relayWorkerSignals(): void {
  cluster.on('message', (_sender, message: unknown) => {
    if (!isSignal(message)) return;
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker?.isConnected()) worker.send(message);
    }
  });
}

/** In the primary of `rowi serve --workers N`: says `topic` to these workers (all by default), as a worker's publish would. */
export function publishToWorkers(topic: string, workers = Object.values(cluster.workers ?? {})): void {
  for (const worker of workers) if (worker?.isConnected()) worker.send({ type: IPC_TYPE, topic });
}

/** The topic of a signal a worker sent to the primary, else undefined. */
export function topicOf(message: unknown): string | undefined {
  return isSignal(message) ? message.topic : undefined;
}

function isSignal(message: unknown): message is { type: string; topic: string } {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === IPC_TYPE &&
    typeof (message as { topic?: unknown }).topic === 'string'
  );
}

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5000;

/**
 * LISTEN on a connection of its own (not from the pool: a pooled connection is handed to other
 * queries), reconnecting with back-off when it is lost. Publishing uses the pool.
 */
export function postgresSignals(
  pool: pg.Pool,
  clientConfig: pg.ClientConfig,
  channel: string,
  log: FastifyBaseLogger,
): Signals {
  const handlers = new Handlers();
  /** The listener connecting or connected; a failure of any older one is ignored. */
  let current: pg.Client | undefined;
  let closed = false;
  let delay = RECONNECT_MIN_MS;
  let timer: NodeJS.Timeout | undefined;
  let lost = false;

  const connect = async () => {
    timer = undefined;
    if (closed) return;
    const listener = new pg.Client(clientConfig);
    current = listener;
    listener.on('notification', (message) => {
      if (message.channel === channel) handlers.deliver(message.payload ?? EVERYTHING);
    });
    listener.on('error', (error) => {
      log.warn(
        `database connection lost: ${faultOf(error)} (the one that listens for other instances' changes; reconnecting)`,
      );
      retry(listener);
    });
    listener.on('end', () => retry(listener));
    try {
      await listener.connect();
      await listener.query(`listen ${pg.escapeIdentifier(channel)}`);
      delay = RECONNECT_MIN_MS;
      if (closed) await listener.end();
      if (lost) {
        lost = false;
        log.info('listening for changes on other instances again');
        handlers.deliver(EVERYTHING);
      }
    } catch {
      retry(listener);
    }
  };

  const retry = (listener: pg.Client) => {
    if (listener !== current) return;
    current = undefined;
    listener.removeAllListeners('end');
    listener.end().catch(() => {});
    lost = true;
    if (closed || timer !== undefined) return;
    timer = setTimeout(() => void connect(), delay);
    timer.unref();
    delay = Math.min(delay * 2, RECONNECT_MAX_MS);
  };

  void connect();
  return {
    async publish(topic) {
      await pool.query('select pg_notify($1, $2)', [channel, topic]);
    },
    subscribe: (handler) => handlers.add(handler),
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      const listener = current;
      current = undefined;
      if (listener) {
        listener.removeAllListeners('end');
        await listener.end().catch(() => {});
      }
    },
  };
}
