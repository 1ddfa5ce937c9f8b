import { afterEach, describe, expect, it } from 'vitest';
import { callServer, startServer, type RunningServer } from '../helpers/process.js';
import { eventually, Receiver } from '../helpers/receiver.js';

/** Retries every 0.5 s, twenty of them, and no disabling: the attempts across restarts are what is looked at. */
const SETTINGS = {
  ROWI_WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 20 }, () => '0.5').join(','),
  ROWI_WEBHOOK_TIMEOUT: '1000',
  ROWI_WEBHOOK_DISABLE_AFTER: '1000',
};
const ALLOWED = { ...SETTINGS, ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' };

const servers: RunningServer[] = [];
let receiver: Receiver | undefined;
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
  await receiver?.stop();
});

async function start(options: Parameters<typeof startServer>[0]) {
  const server = await startServer(options);
  servers.push(server);
  return server;
}

type Delivery = { status: string; attempts: { status_code: number | null; error: string | null }[] };
const deliveriesOf = async (server: RunningServer, id: number) =>
  (await callServer(server, 'GET', `/v1/webhook-endpoints/${id}/deliveries`)).json.data as Delivery[];

describe('the webhook URL policy, before every attempt', () => {
  it('an endpoint registered while ROWI_WEBHOOK_ALLOW_HOSTS allowed it: after a restart without the setting every attempt fails saying why and nothing is sent; with the setting back it is delivered', async () => {
    receiver = await new Receiver().start();
    const first = await start({ env: ALLOWED });
    const plain = await callServer(first, 'POST', '/v1/webhook-endpoints', {
      url: receiver.url,
      events: ['user.created'],
    });
    const secure = await callServer(first, 'POST', '/v1/webhook-endpoints', {
      url: receiver.url.replace('http:', 'https:'),
      events: ['user.created'],
    });
    expect([plain.status, secure.status]).toEqual([201, 201]);
    await first.stop('SIGTERM');

    const second = await start({ database: first.database, adminKey: first.adminKey, env: SETTINGS });
    expect(
      (
        await callServer(second, 'POST', '/v1/users', {
          name: 'After restart',
          email: `restart.${process.pid}@example.com`,
        })
      ).status,
    ).toBe(201);
    const [waiting] = await eventually(
      () => deliveriesOf(second, plain.json.id),
      (list) => (list[0]?.attempts.length ?? 0) >= 2,
      15_000,
    );
    expect(waiting!.status).toBe('pending');
    for (const attempt of waiting!.attempts)
      expect(attempt).toEqual({
        attempted_at: expect.any(String),
        status_code: null,
        duration_ms: 0,
        error: 'not sent: the URL must use https (http:// only for hosts in ROWI_WEBHOOK_ALLOW_HOSTS)',
      });
    const [refused] = await eventually(
      () => deliveriesOf(second, secure.json.id),
      (list) => (list[0]?.attempts.length ?? 0) >= 1,
      15_000,
    );
    expect(refused!.attempts[0]!.error).toBe('not sent: the URL names 127.0.0.1, a loopback address');
    expect(receiver.received).toEqual([]);
    await second.stop('SIGTERM');

    // The setting may come back (a deployment put right): a refused attempt is retried like any failure.
    const third = await start({ database: first.database, adminKey: first.adminKey, env: ALLOWED });
    const [received] = await receiver.waitFor(1, 15_000);
    expect(received!.event.data.name).toBe('After restart');
    const [delivered] = await eventually(
      () => deliveriesOf(third, plain.json.id),
      (list) => list[0]?.status === 'succeeded',
      15_000,
    );
    expect(delivered!.attempts.at(-1)!.status_code).toBe(200);
  }, 90_000);
});
