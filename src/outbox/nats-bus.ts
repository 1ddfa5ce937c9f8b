import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { faultOf } from '../observability/logger.js';
import { isSqlite } from '../db/dialect.js';
import { unitOfWork } from '../db/unit-of-work.js';
import type { EventFeed } from './feed.js';
import { Lease } from './lease.js';
import { OutboxWorker } from './outbox-worker.js';
import { presentEvent } from './outbox.js';
import { cursorOf, findEventsAfter, moveCursor, positionOf } from './outbox.repository.js';

const CURSOR = 'nats';
/**
 * The publisher's lease on PostgreSQL: renewed on a heartbeat every second, so a holder that stops
 * (a host gone) is taken over once it runs out, within a few seconds. On SQLite every process is
 * on one host, where a holder that died is taken over at once (lease.ts): the lease is long and
 * renewed as it works.
 */
const LEASE_MS = 4000;
const SQLITE_LEASE_MS = 15_000;
const HEARTBEAT_MS = 1000;
const BATCH = 200;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 10_000;

/**
 * The bus (ROWI_NATS_URL): every committed event is published to NATS JetStream on
 * `rowi.events.<type>` (ROWI_NATS_SUBJECT), from the outbox, in outbox order, by the one process holding the bus's
 * lease. The event id is the message id, so JetStream drops a message published twice (after a
 * crash between publishing and moving the cursor) within its duplicate window; the cursor moves
 * only past events JetStream acknowledged, so none is lost while NATS is away: publishing resumes
 * where it stopped, with back-off. On PostgreSQL the holder beats every second, and a process of
 * another host takes over within a few seconds of its last beat (docs/events.md).
 */
export class NatsBus extends OutboxWorker {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #url: string;
  readonly #stream: string;
  readonly #subject: string;
  readonly #lease: Lease;
  #connection: NatsConnection | undefined;
  #client: JetStreamClient | undefined;
  #retryMs = RETRY_MIN_MS;
  readonly #heartbeat: NodeJS.Timeout | undefined;

  constructor(
    db: Db,
    feed: EventFeed,
    log: FastifyBaseLogger,
    options: { url: string; stream: string; subject: string; owner: string },
  ) {
    super(feed);
    this.#db = db;
    this.#log = log;
    this.#url = options.url;
    this.#stream = options.stream;
    this.#subject = options.subject;
    const beats = !isSqlite(db);
    this.#lease = new Lease(db, CURSOR, options.owner, beats ? LEASE_MS : SQLITE_LEASE_MS);
    if (beats) {
      this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
      this.#heartbeat.unref();
    }
  }

  override async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    await super.close();
    await this.#connection?.close().catch(() => {});
  }

  /** Renews the lease while idle, or takes it from a holder that stopped beating, and then publishes what waits. */
  async #beat(): Promise<void> {
    const before = this.#lease.heldNow();
    // A failure is the rounds' to report (they meet the same database).
    const held = await this.#lease.beat().catch(() => false);
    if (held && !before) this.wake();
  }

  protected async round(): Promise<boolean> {
    if (!(await this.#lease.held())) {
      this.later(this.#lease.retryMs);
      return false;
    }
    while ((await this.#publishBatch()) === BATCH && !this.closed);
    return true;
  }

  protected async settled(): Promise<void> {
    this.#retryMs = RETRY_MIN_MS;
  }

  protected async failed(error: unknown): Promise<void> {
    // The database unreachable (reading the outbox) is said once an outage; NATS failing, every retry (with back-off).
    this.#db.outage.failed(
      this.#log,
      'nats-bus',
      error,
      `could not publish events to NATS: ${faultOf(error)}; trying again in ${this.#retryMs} ms`,
    );
    await this.#disconnect();
    this.later(this.#retryMs);
    this.#retryMs = Math.min(this.#retryMs * 2, RETRY_MAX_MS);
  }

  async #publishBatch(): Promise<number> {
    const cursor = await cursorOf(this.#db, CURSOR);
    const events = await findEventsAfter(this.#db, cursor, { limit: BATCH });
    if (events.length === 0) return 0;
    const client = await this.#jetstream();
    for (const event of events) {
      await client.publish(`${this.#subject}.${event.type}`, JSON.stringify(presentEvent(event)), { msgID: event.id });
    }
    const moved = await unitOfWork(this.#db, (trx) =>
      moveCursor(trx, CURSOR, this.#lease.owner, positionOf(events[events.length - 1]!)),
    );
    if (!moved) throw new Error('the NATS publisher lost its lease');
    return events.length;
  }

  async #jetstream(): Promise<JetStreamClient> {
    if (this.#client && this.#connection && !this.#connection.isClosed()) return this.#client;
    const connection = await connect({ servers: this.#url, name: 'rowi', reconnect: false, timeout: 2000 });
    const manager = await jetstreamManager(connection);
    try {
      await manager.streams.info(this.#stream);
    } catch {
      await manager.streams.add({ name: this.#stream, subjects: [`${this.#subject}.>`] });
    }
    this.#connection = connection;
    this.#client = jetstream(connection);
    this.#log.info({ stream: this.#stream }, 'publishing events to NATS JetStream');
    return this.#client;
  }

  async #disconnect(): Promise<void> {
    const connection = this.#connection;
    this.#connection = undefined;
    this.#client = undefined;
    await connection?.close().catch(() => {});
  }
}
