import { afterEach, describe, expect, it } from 'vitest';
import { sample } from '../helpers/metrics.js';
import { callServer, serverPool, type RunningServer } from '../helpers/process.js';
import { eventually, Receiver } from '../helpers/receiver.js';

/**
 * The webhook thread (the default, ROWI_WEBHOOK_THREAD=thread) is started only while an endpoint
 * is enabled, in the process that holds the dispatcher's lease (outbox/webhook-standby.ts), as the
 * caller sees it in rowi_webhook_threads; deliveries go out once an endpoint is created, through
 * whichever process or worker.
 */
const SETTINGS = { ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' };

const { serve: start, killAll } = serverPool({ env: SETTINGS });
const receivers: Receiver[] = [];
afterEach(async () => {
  killAll();
  await Promise.all(receivers.splice(0).map((receiver) => receiver.stop()));
});

/** The webhook threads the server reports (with --workers, every worker's added up). */
const threads = async (server: RunningServer) =>
  sample(
    await (await fetch(`${server.baseUrl}/metrics`, { headers: { 'x-api-key': server.adminKey } })).text(),
    'rowi_webhook_threads',
  );

async function createUsers(server: RunningServer, label: string, count: number): Promise<number[]> {
  const replies = await Promise.all(
    Array.from({ length: count }, (_, index) =>
      callServer(server, 'POST', '/v1/users', {
        name: `${label} ${index}`,
        email: `${label}${index}.${process.pid}@example.com`,
      }),
    ),
  );
  for (const reply of replies) expect(reply.status).toBe(201);
  return replies.map((reply) => reply.json.id as number).sort((a, b) => a - b);
}

async function receiverEndpoint(server: RunningServer) {
  const receiver = await new Receiver().start();
  receivers.push(receiver);
  const endpoint = await callServer(server, 'POST', '/v1/webhook-endpoints', {
    url: receiver.url,
    events: ['user.created'],
  });
  expect(endpoint.status).toBe(201);
  return { receiver, id: endpoint.json.id as number };
}

const deliveredIds = (receiver: Receiver) =>
  receiver.received.map((request) => request.event.data.id as number).sort((a, b) => a - b);

describe('the webhook thread, started while an endpoint is enabled', () => {
  it('GET /metrics: no webhook thread while no endpoint exists, events or not; an endpoint created through another instance starts one in the instance holding the lease, which delivers', async () => {
    // The first holds the dispatcher's lease: it takes it as it starts, before the second exists.
    const first = await start();
    const second = await start({ database: first.database, adminKey: first.adminKey });
    await createUsers(second, 'Before', 5);
    // Longer than a beat of the standby (a second), which would have started it.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect([await threads(first), await threads(second)]).toEqual([0, 0]);

    const { receiver } = await receiverEndpoint(second);
    await eventually(
      () => threads(first),
      (count) => count === 1,
      15_000,
    );
    const ids = await createUsers(second, 'After', 10);
    await receiver.waitFor(10, 20_000);
    // The users made before the endpoint are not its events; the others are delivered once each.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(deliveredIds(receiver)).toEqual(ids);
    expect([await threads(first), await threads(second)]).toEqual([1, 0]);
  }, 60_000);

  it('rowi serve --workers 2: one webhook thread in all once an endpoint is created, its deliveries sent; none again once the endpoint is deleted', async () => {
    const server = await start({ args: ['--workers', '2'] });
    expect(await threads(server)).toBe(0);

    const { receiver, id } = await receiverEndpoint(server);
    const ids = await createUsers(server, 'Worker', 10);
    await receiver.waitFor(10, 20_000);
    expect(deliveredIds(receiver)).toEqual(ids);
    expect(await threads(server)).toBe(1);

    expect((await callServer(server, 'DELETE', `/v1/webhook-endpoints/${id}`)).status).toBe(204);
    // Stopped once no endpoint has been enabled for 8 s (looked at every 2 s).
    await eventually(
      () => threads(server),
      (count) => count === 0,
      25_000,
    );
  }, 60_000);
});
