import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';
import { eventually } from '../helpers/receiver.js';

/**
 * The NATS publisher's heartbeat (outbox/nats-bus.ts, docs/events.md): two rowi processes on one
 * PostgreSQL database publish to NATS; the one that publishes stops answering (SIGSTOP: its pid
 * still runs, as a process on another host would seem to), and the other takes the publishing over
 * within a few seconds, not after a 15 s lease ran out.
 */
const NATS_URL = process.env.ROWI_TEST_NATS_URL || undefined;
const tag = `t${process.pid}${Date.now().toString(36)}`;
const subject = `rowitest.${tag}.takeover`;
const stream = `ROWI_TEST_${tag}_TAKEOVER`.toUpperCase();
const SETTINGS = { ROWI_NATS_URL: NATS_URL ?? '', ROWI_NATS_SUBJECT: subject, ROWI_NATS_STREAM: stream };

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
});

async function createUser(server: RunningServer, name: string): Promise<number> {
  const response = await fetch(`${server.baseUrl}/v1/users`, {
    method: 'POST',
    headers: { 'x-api-key': server.adminKey, 'content-type': 'application/json' },
    body: JSON.stringify({ name, email: `${name.toLowerCase()}.${tag}@example.com` }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { id: number }).id;
}

if (NATS_URL === undefined) console.warn('skipped: the NATS takeover test needs ROWI_TEST_NATS_URL');

describe.skipIf(NATS_URL === undefined)('NATS publisher heartbeat on PostgreSQL', () => {
  let nats: NatsConnection;
  beforeAll(async () => {
    nats = await connect({ servers: NATS_URL! });
  });
  afterAll(async () => {
    await jetstreamManager(nats)
      .then((manager) => manager.streams.delete(stream))
      .catch(() => {});
    await nats?.close();
  });

  /** The ids of the users whose user.created was published so far, waiting until `id` is among them. */
  async function publishedUser(id: number, ms: number): Promise<number[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const info = await (await jetstreamManager(nats)).streams.info(stream).catch(() => undefined);
      if (info && info.state.messages > 0) {
        const consumer = await jetstream(nats).consumers.get(stream);
        const ids: number[] = [];
        let read = 0;
        for await (const message of await consumer.fetch({ max_messages: info.state.messages, expires: 2000 })) {
          const event = message.json<{ type: string; data: { id: number } }>();
          if (event.type === 'user.created') ids.push(event.data.id);
          if (++read === info.state.messages) break;
        }
        if (ids.includes(id)) return ids;
      }
      if (Date.now() > deadline) throw new Error(`user ${id}'s user.created was not published within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('the publishing process stops (SIGSTOP): the other publishes the events committed after it within a few seconds, each once', async () => {
    const first = await startServer({ env: SETTINGS, timeoutMs: 60_000 });
    servers.push(first);
    const database = new pg.Client({ connectionString: first.database.ROWI_DATABASE_URL });
    await database.connect();
    /** The pid of the process that holds the publisher's lease (holders are named host:pid:random). */
    const publisher = async () =>
      (
        await database.query<{ lease_owner: string | null }>(
          "select lease_owner from event_cursors where name = 'nats'",
        )
      ).rows[0]?.lease_owner?.split(':')[1];
    try {
      // The first takes the publisher's lease in its first round, at start; the second then asks every second.
      await eventually(publisher, (pid) => pid === String(first.child.pid), 20_000);
      const second = await startServer({
        database: first.database,
        env: SETTINGS,
        adminKey: first.adminKey,
        timeoutMs: 60_000,
      });
      servers.push(second);
      const early = await createUser(second, 'Early');
      await publishedUser(early, 10_000);
      // Idle, the first has kept the lease by its heartbeat.
      expect(await publisher()).toBe(String(first.child.pid));
      first.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      const late = await createUser(second, 'Late');
      const ids = await publishedUser(late, 20_000);
      const tookOver = Date.now() - stoppedAt;
      // The lease runs out 4 s after the last heartbeat; the other asks every second. (Before: 15 s.)
      expect(tookOver, `taken over after ${tookOver} ms`).toBeLessThan(9000);
      expect(await publisher()).toBe(String(second.child.pid));
      expect(ids.filter((id) => id === early)).toHaveLength(1);
      expect(ids.filter((id) => id === late)).toHaveLength(1);
    } finally {
      await database.end();
    }
  }, 90_000);
});
