import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { withCommits } from '../../src/db/commits.js';
import { DatabaseOutage, withOutage } from '../../src/db/outage.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import type { Database } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { unitOfWork } from '../../src/db/unit-of-work.js';
import { recordEvent } from '../../src/outbox/outbox.js';
import { START, findEventsAfter } from '../../src/outbox/outbox.repository.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Which events a reader of the outbox may take on PostgreSQL (outbox.repository.ts `settled`):
 * never one that a transaction, invisible to the reader's snapshot, could still sort before. The
 * race it closes: a writer that was running when the reader's statement took its snapshot, and
 * committed before the statement looked at the writers' locks, no longer shows as a writer; the
 * reader then took the events of later transactions, moved its cursor past them, and never saw the
 * writer's event (seen in the deployment test: one order.created of 2,437 never fanned out). A
 * REPEATABLE READ reader holds its snapshot across statements, which makes the race deterministic.
 */
const storages: Storage[] = [];
const databases: TestDatabase[] = [];
const readers: Kysely<Database>[] = [];
afterEach(async () => {
  for (const reader of readers.splice(0)) await reader.destroy();
  for (const storage of storages.splice(0)) await storage.close();
  for (const database of databases.splice(0)) await database.drop();
});

describe.skipIf(process.env.ROWI_TEST_BACKEND !== 'postgres')('outbox readers on PostgreSQL', () => {
  it('an event of a transaction still running at the reader’s snapshot, committed since, holds back the later events: none is taken before it', async () => {
    const database = await createTestDatabase('postgres');
    databases.push(database);
    const url = database.env.ROWI_DATABASE_URL!;
    const storage = await openStorage(
      loadConfig({ ROWI_DATABASE_URL: url, ROWI_LOG_LEVEL: 'silent' }),
      pino({ level: 'silent' }),
    );
    storages.push(storage);
    await migrateToLatest(storage.db);
    const { db } = storage;
    const event = (trx: Parameters<Parameters<typeof unitOfWork>[1]>[0], id: number) =>
      recordEvent(trx, 'user.created', `/v1/users/${id}`, { id, name: `u${id}`, created_by: null });

    // The early writer takes its transaction id first (its event), then waits.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let wrote!: () => void;
    const written = new Promise<void>((resolve) => (wrote = resolve));
    const early = unitOfWork(db, async (trx) => {
      await event(trx, 1);
      wrote();
      await held;
    });
    await written;
    // A later writer commits: its transaction id is greater.
    await unitOfWork(db, (trx) => event(trx, 2));

    // The reader's snapshot: the early writer running, the later one committed.
    const reader = withOutage(
      withCommits(
        new Kysely<Database>({
          dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }),
        }),
      ),
      new DatabaseOutage(undefined),
    );
    readers.push(reader);
    await sql`begin isolation level repeatable read`.execute(reader);
    await sql`select 1`.execute(reader);
    // The early writer commits, after the snapshot.
    release();
    await early;
    const taken = await findEventsAfter(reader, START, { limit: 100 });
    await sql`commit`.execute(reader);
    // Nothing after the invisible event: a reader that moved its cursor past /v1/users/2 would never see /v1/users/1.
    expect(taken.map((row) => row.path)).toEqual([]);

    // A reader that looks now takes both, in commit order of their transactions.
    expect((await findEventsAfter(db, START, { limit: 100 })).map((row) => row.path)).toEqual([
      '/v1/users/1',
      '/v1/users/2',
    ]);
  });
});
