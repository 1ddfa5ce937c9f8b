import { afterEach, describe, expect, it } from 'vitest';
import { callServer, startServer, type RunningServer } from '../helpers/process.js';
import { eventually, Receiver } from '../helpers/receiver.js';

/**
 * The webhook dispatcher's heartbeat (outbox/webhook-dispatcher.ts, docs/events.md): two rowi processes on
 * one PostgreSQL database; the one that sends stops answering (SIGSTOP: its pid still runs, as a
 * process on another host would seem to), and the other takes its work over within a few
 * seconds, its claims included, not after its lease (15 s before) and claims (30 s) ran out.
 */
const SETTINGS = {
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  ROWI_WEBHOOK_RETRY_SCHEDULE: '0.2,0.2',
  ROWI_WEBHOOK_TIMEOUT: '30000',
};

const servers: RunningServer[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
  await Promise.all(receivers.splice(0).map((receiver) => receiver.stop()));
});

const createUser = async (server: RunningServer, name: string) => {
  const made = await callServer(server, 'POST', '/v1/users', {
    name,
    email: `${name.toLowerCase()}.${Date.now()}@example.com`,
  });
  expect(made.status).toBe(201);
  return made.json as { id: number };
};

describe('webhook dispatcher heartbeat on PostgreSQL', () => {
  it('the sending process stops (SIGSTOP) mid-attempt: the other process takes over within a few seconds, sends the stopped one’s claimed delivery again and the new ones', async () => {
    const first = await startServer({ env: SETTINGS, timeoutMs: 60_000 });
    servers.push(first);
    // The second starts once the first holds the dispatcher's lease (its first round, at start).
    const second = await startServer({
      database: first.database,
      env: SETTINGS,
      adminKey: first.adminKey,
      timeoutMs: 60_000,
    });
    servers.push(second);
    const receiver = await new Receiver().start();
    receivers.push(receiver);
    // The first delivery is never answered: the attempt stays in flight, its delivery claimed.
    let answering = false;
    receiver.behaviour = (_request, response) => {
      if (answering) response.writeHead(204).end();
    };
    expect(
      (await callServer(second, 'POST', '/v1/webhook-endpoints', { url: receiver.url, events: ['user.created'] }))
        .status,
    ).toBe(201);
    const early = await createUser(second, 'Early');
    await receiver.waitFor(1, 10_000, (received) => received.event.data.id === early.id);
    first.child.kill('SIGSTOP');
    const stoppedAt = Date.now();
    answering = true;
    const late = [await createUser(second, 'Late1'), await createUser(second, 'Late2')];
    // The early one again (the stopped process's claim given back at the takeover), and the late ones.
    await receiver.waitFor(2, 20_000, (received) => received.event.data.id === early.id);
    for (const user of late) await receiver.waitFor(1, 20_000, (received) => received.event.data.id === user.id);
    const tookOver = Date.now() - stoppedAt;
    // The lease runs out 4 s after the last heartbeat; the other asks every second. (Before: 15 s, and 30 s for the claim.)
    expect(tookOver, `taken over after ${tookOver} ms`).toBeLessThan(9000);
    // Outcomes are written in bulk a moment after the receiver's answers: read until they are.
    const statuses = await eventually(
      async () =>
        (
          (await callServer(second, 'GET', '/v1/webhook-endpoints/1/deliveries?limit=10')).json.data as {
            status: string;
          }[]
        ).map((delivery) => delivery.status),
      (listed) => listed.every((status) => status !== 'pending'),
      10_000,
    );
    expect(statuses).toEqual(['succeeded', 'succeeded', 'succeeded']);
  }, 90_000);
});
