import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { openStorage, type Storage } from '../../src/db/connect.js';
import { EVERYTHING } from '../../src/db/signals.js';
import { adminQuery, createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Signals between rowi instances on PostgreSQL (LISTEN/NOTIFY, one channel per schema), seen
 * from the subscribers: instances on one schema hear each other, another schema hears nothing,
 * and a listener whose connection is cut comes back by itself and says EVERYTHING may have changed.
 */

const storages: Storage[] = [];
const databases: TestDatabase[] = [];

afterEach(async () => {
  for (const storage of storages.splice(0)) await storage.close();
  for (const database of databases.splice(0)) await database.drop();
});

async function schema(): Promise<{ url: string; name: string }> {
  const database = await createTestDatabase('postgres');
  databases.push(database);
  return { url: database.env.ROWI_DATABASE_URL!, name: database.schema! };
}

/** Topics a subscriber heard, in order. */
interface Heard {
  topics: string[];
  /** Resolves once `topic` has been heard (counting what was heard before), rejects after `limitMs`. */
  next(topic: string, limitMs: number): Promise<void>;
}

async function open(url: string): Promise<{ storage: Storage; heard: Heard }> {
  const storage = await openStorage(
    loadConfig({ ROWI_DATABASE_URL: url, ROWI_LOG_LEVEL: 'silent' }),
    pino({ level: 'silent' }),
  );
  storages.push(storage);
  const topics: string[] = [];
  storage.signals.subscribe((topic) => topics.push(topic));
  const heard: Heard = {
    topics,
    async next(topic, limitMs) {
      const deadline = performance.now() + limitMs;
      while (!topics.includes(topic)) {
        if (performance.now() > deadline)
          throw new Error(`"${topic}" not heard within ${limitMs} ms (heard ${JSON.stringify(topics)})`);
        await sleep(10);
      }
    },
  };
  return { storage, heard };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Backend pids of the rowi connections that LISTEN on the schema's channel (each storage has one of its own). */
async function listeners(schemaName: string): Promise<number[]> {
  const { rows } = await adminQuery(
    "select pid from pg_stat_activity where application_name = 'rowi' and query = $1 and state = 'idle' order by pid",
    [`listen "rowi.${schemaName}"`],
  );
  return rows.map((row: { pid: number }) => row.pid);
}

/** Waits until exactly `count` listeners are on the schema's channel; returns their pids. */
async function awaitListeners(schemaName: string, count: number, limitMs = 3000): Promise<number[]> {
  const deadline = performance.now() + limitMs;
  for (;;) {
    const pids = await listeners(schemaName);
    if (pids.length === count) return pids;
    if (performance.now() > deadline)
      throw new Error(`${count} listeners on ${schemaName} expected, found ${pids.length}`);
    await sleep(25);
  }
}

describe('signals on PostgreSQL (LISTEN/NOTIFY)', () => {
  it('instances on one schema hear each other, another schema hears nothing; a listener cut off reconnects, hears EVERYTHING, then hears publishes again', async () => {
    const shared = await schema();
    const other = await schema();

    // B first, so that its listener is the one already on the channel when A's arrives.
    const b = await open(shared.url);
    const [bListener] = await awaitListeners(shared.name, 1);
    const a = await open(shared.url);
    const aListener = (await awaitListeners(shared.name, 2)).find((pid) => pid !== bListener)!;
    const c = await open(other.url);
    await awaitListeners(other.name, 1);

    await a.storage.signals.publish('credentials');
    await b.heard.next('credentials', 1000);
    await a.heard.next('credentials', 1000); // a publisher hears itself too
    // C is listening (it hears its own publish), yet hears nothing of the other schema's.
    await c.storage.signals.publish('signing-keys');
    await c.heard.next('signing-keys', 1000);
    await sleep(200);
    expect(c.heard.topics).toEqual(['signing-keys']);
    expect(b.heard.topics).toEqual(['credentials']);
    expect(a.heard.topics).toEqual(['credentials']);

    // B's listening connection is ended by the server (as on a restart or a failover).
    const { rows } = await adminQuery('select pg_terminate_backend($1) as ended', [bListener]);
    expect(rows).toEqual([{ ended: true }]);
    await b.heard.next(EVERYTHING, 5000);
    const after = await awaitListeners(shared.name, 2);
    expect(after).toContain(aListener);
    expect(after).not.toContain(bListener);
    // A's listener was not touched, so A has nothing to forget.
    expect(a.heard.topics).toEqual(['credentials']);

    await a.storage.signals.publish('callers');
    await b.heard.next('callers', 1000);
    expect(b.heard.topics).toEqual(['credentials', EVERYTHING, 'callers']);
    expect(c.heard.topics).toEqual(['signing-keys']);
  });

  it('close() ends the listening connection; nothing is heard after it', async () => {
    const shared = await schema();
    const a = await open(shared.url);
    const b = await open(shared.url);
    await awaitListeners(shared.name, 2);
    await b.storage.close();
    storages.splice(storages.indexOf(b.storage), 1);
    await awaitListeners(shared.name, 1);
    await a.storage.signals.publish('credentials');
    await a.heard.next('credentials', 1000);
    await sleep(200);
    expect(b.heard.topics).toEqual([]);
  });
});
