import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import { metrics, secondsSince } from '../observability/metrics.js';
import { wantsArrayRows } from './array-rows.js';
import type pg from 'pg';

/**
 * At most this many distinct statements are prepared, per connection; any other runs unprepared,
 * as every statement did before. rowi's queries are parameterised, so their texts are few (a list
 * of n values is one text per n); the bound keeps a connection's plans in PostgreSQL's memory
 * bounded whatever the callers send.
 */
export const MAX_PREPARED_STATEMENTS = 256;

/**
 * The pool Kysely draws its PostgreSQL connections from, with every statement prepared once per
 * connection: the first execution of a text on a connection parses it under a name, later ones
 * only bind and execute it, and PostgreSQL may keep a plan for it. Unprepared, PostgreSQL parses
 * and plans every statement every time; for an order's placement (one data-modifying WITH) that
 * was about half of the server's time for the statement, and PostgreSQL's CPU was what bounded
 * orders on one machine (docs/performance.md).
 *
 * A pooler between rowi and PostgreSQL must keep prepared statements per client: PgBouncer 1.21
 * and later in transaction mode does, with max_prepared_statements set.
 */
export class PreparingPool implements PostgresPool {
  readonly #pool: pg.Pool;
  /** The name of each statement text prepared so far, shared by every connection of the pool. */
  readonly #names = new Map<string, string>();
  readonly #failed: (error: unknown) => void;

  /** `failed` sees every error a statement ends with (how storage learns of damage, corruption.ts). */
  constructor(pool: pg.Pool, failed: (error: unknown) => void = () => {}) {
    this.#pool = pool;
    this.#failed = failed;
  }

  async connect(): Promise<PostgresPoolClient> {
    const start = process.hrtime.bigint();
    const client = await this.#pool.connect();
    metrics.poolWait.observe(secondsSince(start));
    return new PreparingClient(client, this.#nameOf, this.#failed);
  }

  end(): Promise<void> {
    return this.#pool.end();
  }

  /** The statement's name; undefined (unprepared) once MAX_PREPARED_STATEMENTS texts have names. */
  readonly #nameOf = (sql: string): string | undefined => {
    let name = this.#names.get(sql);
    if (name === undefined && this.#names.size < MAX_PREPARED_STATEMENTS) {
      name = `rowi_${this.#names.size}`;
      this.#names.set(sql, name);
    }
    return name;
  };
}

/**
 * Every transaction rowi begins on PostgreSQL first takes a shared advisory lock of its schema
 * (one simple query with the BEGIN, so no round trip more), before it has a transaction id. The
 * readers of the outbox use it to know which running transactions may still add events: those
 * holding the lock (outbox/outbox.repository.ts). Shared locks never wait for each other.
 */
export const WRITERS_LOCK_CLASS = 1919907689;
const BEGIN_AS_WRITER = `begin; select pg_advisory_xact_lock_shared(${WRITERS_LOCK_CLASS}, hashtext(current_schema()))`;

/** A connection of the pool, its statements run under the pool's names for them. */
class PreparingClient implements PostgresPoolClient {
  readonly #client: pg.PoolClient;
  readonly #nameOf: (sql: string) => string | undefined;
  readonly #failed: (error: unknown) => void;

  constructor(client: pg.PoolClient, nameOf: (sql: string) => string | undefined, failed: (error: unknown) => void) {
    this.#client = client;
    this.#nameOf = nameOf;
    this.#failed = failed;
  }

  /** The statement's answer, its error seen on the way. */
  #watched<R>(answer: Promise<unknown>): Promise<PostgresQueryResult<R>> {
    return answer.catch((error: unknown) => {
      this.#failed(error);
      throw error;
    }) as Promise<PostgresQueryResult<R>>;
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sql: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // A cursor (Kysely's streaming) is submitted as it is.
    if (typeof sql !== 'string')
      return this.#client.query(sql as unknown as pg.Submittable) as unknown as PostgresCursor<R>;
    // Kysely's BEGIN of a transaction (its answer is not read).
    if (sql === 'begin') return this.#watched(this.#client.query(BEGIN_AS_WRITER));
    const values = [...(parameters ?? [])];
    const name = this.#nameOf(sql);
    if (wantsArrayRows(sql)) return this.#watched(this.#client.query({ name, text: sql, values, rowMode: 'array' }));
    return this.#watched(this.#client.query({ name, text: sql, values }));
  }

  release(): void {
    this.#client.release();
  }
}
