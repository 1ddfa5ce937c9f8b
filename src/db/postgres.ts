import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { ConfigError, type Config } from '../config/config.js';
import { faultOf } from '../observability/logger.js';
import { CorruptionWatch } from './corruption.js';
import { DatabaseOutage } from './outage.js';
import { RowiPostgresDialect } from './postgres-dialect.js';
import { PreparingPool } from './prepared-statements.js';
import { EVERYTHING, Handlers, processSignals, type Signals } from './signals.js';
import { databaseHandle, withHandleBeside, type Storage } from './storage.js';

/**
 * PostgreSQL: the pool, its Kysely, and LISTEN/NOTIFY between instances. In a file of its own,
 * imported by connect.ts only when ROWI_DATABASE_URL is set, so that the driver is not loaded by a
 * rowi on SQLite.
 */

type PostgresSettings = Pick<Config, 'databaseUrl' | 'databasePoolSize' | 'databaseTimeout'>;

/** PostgreSQL's int8 (ids, money in cents, counts) as a JS number: every value rowi stores is a safe integer. */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => Number(text)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * A pool of at most ROWI_DATABASE_POOL_SIZE connections. A request waits at most
 * ROWI_DATABASE_TIMEOUT ms for a connection and a statement runs at most as long; either limit
 * ends in an error that the problem handler answers with 503 and Retry-After (isUnavailable).
 * A connection idle inside a transaction (a process stuck or gone) is ended by the server.
 */
export async function openPostgres(
  settings: PostgresSettings,
  log: FastifyBaseLogger,
  { listens = true }: { listens?: boolean } = {},
): Promise<Storage> {
  const clientConfig: pg.ClientConfig = {
    connectionString: settings.databaseUrl,
    statement_timeout: settings.databaseTimeout,
    idle_in_transaction_session_timeout: Math.max(settings.databaseTimeout * 2, 10_000),
    connectionTimeoutMillis: settings.databaseTimeout,
    application_name: 'rowi',
    keepAlive: true,
    types,
  };
  const pool = watchedPool({ ...clientConfig, max: settings.databasePoolSize, idleTimeoutMillis: 30_000 }, log);
  const where = describePostgres(settings.databaseUrl);
  let schema: string;
  try {
    const { rows } = await pool.query<{ schema: string | null }>('select current_schema() as schema');
    schema = rows[0]?.schema ?? '';
    if (schema === '')
      throw new Error('no schema is on the search_path (set options=-c search_path=… or create the schema)');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new ConfigError(`ROWI_DATABASE_URL (${where}) cannot be used: ${(error as Error).message}`);
  }
  const describe = `PostgreSQL ${where}${schema === 'public' ? '' : ` schema ${schema}`}`;
  const corruption = new CorruptionWatch({ kind: 'postgres', describe, log });
  const outage = new DatabaseOutage(log);
  const db = databaseHandle(new RowiPostgresDialect({ pool: new PreparingPool(pool, corruption.observe) }), outage);
  outage.watch(db);
  // A second opening in a process (its webhook thread) is told of changes by the first: no listener of its own.
  const signals = listens ? postgresSignals(pool, clientConfig, `rowi.${schema}`, log) : processSignals();
  return {
    db,
    kind: 'postgres',
    describe,
    signals,
    corruption,
    async unbounded(work) {
      const { statement_timeout: _limit, ...unlimited } = clientConfig;
      return withHandleBeside(db, new RowiPostgresDialect({ pool: watchedPool({ ...unlimited, max: 1 }, log) }), work);
    },
    async close() {
      outage.stop();
      await signals.close();
      await db.destroy();
      // Kysely ends the pool only if it ever used it; the first query above took a connection of
      // it either way, which would keep its thread alive for the pool's idle time-out (the import
      // thread of a process that imported nothing took 10 s to end).
      if (!pool.ended) await pool.end();
    },
  };
}

/** A pool whose lost connections are logged instead of ending the process. */
function watchedPool(config: pg.PoolConfig, log: FastifyBaseLogger): pg.Pool {
  const pool = new pg.Pool(config);
  // An idle connection that the server drops (a restart) is discarded; nothing to answer.
  // One short line naming the fault: the error pg emits here carries the whole client.
  pool.on('error', (error) => log.warn(`database connection lost: ${faultOf(error)} (an idle one; it is replaced)`));
  // A connection lost while a request holds it fails that request's query (a 503), and pg also
  // emits 'error' on the client, which the pool does not listen to while the client is checked
  // out: without a listener of its own, that event would end the process. The pool discards the
  // client when it is released.
  pool.on('connect', (client) =>
    client.on('error', (error) => log.debug(`database connection lost: ${faultOf(error)} (one in use)`)),
  );
  return pool;
}

/** user@host:port/database, without the password or the query. */
export function describePostgres(url: string): string {
  try {
    const parsed = new URL(url);
    const user = parsed.username === '' ? '' : `${decodeURIComponent(parsed.username)}@`;
    return `${user}${parsed.host}${parsed.pathname}`;
  } catch {
    return 'an unparsable URL';
  }
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
