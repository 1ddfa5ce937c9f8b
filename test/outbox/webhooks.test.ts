import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { answer, eventually, Receiver } from '../helpers/receiver.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';

/** Retries after 0.3 s and 0.3 s (±20 %), then the dead letter; an attempt may take 400 ms. */
const SETTINGS = {
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  ROWI_WEBHOOK_RETRY_SCHEDULE: '0.3,0.3',
  ROWI_WEBHOOK_TIMEOUT: '400',
  ROWI_WEBHOOK_DISABLE_AFTER: '7',
};

let test: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  test = await startApp(SETTINGS);
});
afterAll(() => test.close());
afterEach(async () => {
  await receiver?.stop();
  // Endpoints of one test never receive the next test's events.
  for (const endpoint of (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data)
    await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${endpoint.id}` });
});

async function endpointFor(events: string[] = ['user.created'], key?: string) {
  receiver = await new Receiver().start();
  const created = await test.call({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    body: { url: receiver.url, events },
    ...(key ? { key } : {}),
  });
  expect(created.status, created.text).toBe(201);
  return created.json as { id: number; secret: string };
}

const deliveriesOf = async (endpointId: number) =>
  (await test.call({ url: `/v1/webhook-endpoints/${endpointId}/deliveries` })).json.data as {
    id: number;
    status: string;
    event_type: string;
    attempts: { status_code: number | null; error: string | null; duration_ms: number }[];
  }[];

describe('webhook delivery', () => {
  it('POST /v1/users: the endpoint gets user.created, signed as Standard Webhooks says (checked with the standardwebhooks package)', async () => {
    const endpoint = await endpointFor();
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const { user } = await createUser(test);
    const [received] = await receiver.waitFor(1);
    const payload = new Webhook(endpoint.secret).verify(
      received!.body,
      received!.headers as Record<string, string>,
    ) as { type: string; data: { id: number } };
    expect(payload).toMatchObject({
      type: 'user.created',
      path: `/v1/users/${user.id}`,
      data: { id: user.id, email: user.email },
    });
    expect(received!.headers['webhook-id']).toBe(received!.event.id);
    expect(received!.headers['content-type']).toBe('application/json');
    expect(() =>
      new Webhook(`whsec_${Buffer.from('another secret of 32 bytes......').toString('base64')}`).verify(
        received!.body,
        received!.headers as Record<string, string>,
      ),
    ).toThrow();
    const [delivery] = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list[0]?.status === 'succeeded',
    );
    expect(delivery!.attempts).toMatchObject([{ status_code: 200, error: null }]);
    // The secret is shown once: never in a read.
    expect((await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}` })).text).not.toContain(endpoint.secret);
  });

  it('a receiver that answers 500 twice, then 200: retried on the schedule, delivered once it answers', async () => {
    const endpoint = await endpointFor();
    let calls = 0;
    receiver.behaviour = (request, response) => answer(++calls <= 2 ? 500 : 204)(request, response, undefined as never);
    await createUser(test);
    const received = await receiver.waitFor(3);
    const gaps = [received[1]!.at - received[0]!.at, received[2]!.at - received[1]!.at];
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(200);
    const [delivery] = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list[0]?.status === 'succeeded',
    );
    expect(delivery!.attempts.map((attempt) => attempt.status_code)).toEqual([500, 500, 204]);
    expect(delivery!.attempts[0]!.error).toBe('answered 500');
  });

  for (const [name, behaviour, error] of [
    ['answers 500', answer(500), /^answered 500$/],
    [
      'redirects (not followed)',
      answer(302, { location: 'http://127.0.0.1:9/elsewhere' }),
      /redirects are not followed/,
    ],
    ['hangs past the time-out', () => {}, /no answer within 400 ms/],
    [
      'closes the connection',
      (request: { socket: { destroy(): void } }) => request.socket.destroy(),
      /closed|socket hang up/,
    ],
  ] as const) {
    it(`a receiver that ${name}: three attempts on the schedule, then the dead letter, with each attempt's error`, async () => {
      const endpoint = await endpointFor();
      receiver.behaviour = behaviour as never;
      await createUser(test);
      const [delivery] = await eventually(
        () => deliveriesOf(endpoint.id),
        (list) => list[0]?.status === 'dead',
      );
      expect(delivery!.attempts).toHaveLength(3);
      for (const attempt of delivery!.attempts) expect(attempt.error).toMatch(error);
      expect(receiver.received).toHaveLength(3);
    });
  }

  it('deliveries in a row to one endpoint share one connection (no new connection, or TLS handshake, per delivery)', async () => {
    const endpoint = await endpointFor(['user.created', 'user.updated']);
    const { user } = await createUser(test);
    for (const name of ['A', 'B', 'C', 'D'])
      await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name } });
    const received = await receiver.waitFor(5);
    expect(new Set(received.map((request) => request.connection)).size).toBe(1);
    const deliveries = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list.length === 5 && list.every((delivery) => delivery.status === 'succeeded'),
    );
    expect(deliveries.map((delivery) => delivery.attempts.length)).toEqual([1, 1, 1, 1, 1]);
  });

  it('a receiver that closes idle connections quickly: the next delivery goes on a new connection and succeeds at its first attempt', async () => {
    receiver = new Receiver();
    receiver.idleTimeoutMs = 100;
    await receiver.start();
    const created = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      body: { url: receiver.url, events: ['user.created'] },
    });
    await createUser(test);
    await receiver.waitFor(1);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await createUser(test);
    const received = await receiver.waitFor(2);
    expect(new Set(received.map((request) => request.connection)).size).toBe(2);
    const deliveries = await eventually(
      () => deliveriesOf(created.json.id),
      (list) => list.length === 2 && list.every((delivery) => delivery.status === 'succeeded'),
    );
    expect(deliveries.map((delivery) => delivery.attempts.length)).toEqual([1, 1]);
  });

  it('a kept connection the receiver closes as the next delivery arrives: that delivery is sent again at once on a new connection, one attempt recorded', async () => {
    const endpoint = await endpointFor(['user.created', 'user.updated']);
    const served = new WeakMap<object, number>();
    receiver.behaviour = (request, response, received) => {
      const count = (served.get(request.socket) ?? 0) + 1;
      served.set(request.socket, count);
      if (count === 2) request.socket.destroy();
      else answer(200)(request, response, received);
    };
    const { user } = await createUser(test);
    await receiver.waitFor(1);
    await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Again' } });
    const received = await receiver.waitFor(3);
    // The second delivery twice, with one webhook-id: receivers de-duplicate by it (at least once).
    expect(received.map((request) => request.event.type)).toEqual(['user.created', 'user.updated', 'user.updated']);
    expect(received[2]!.headers['webhook-id']).toBe(received[1]!.headers['webhook-id']);
    expect(received[2]!.connection).not.toBe(received[1]!.connection);
    const deliveries = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list.length === 2 && list.every((delivery) => delivery.status === 'succeeded'),
    );
    expect(deliveries.map((delivery) => delivery.attempts.map((attempt) => attempt.status_code))).toEqual([
      [200],
      [200],
    ]);
  });

  it('a receiver that is down, then comes back: it gets the rest, in order', async () => {
    const endpoint = await endpointFor(['user.created', 'user.updated']);
    const port = await receiver.stop();
    const { user } = await createUser(test);
    for (const name of ['A', 'B', 'C'])
      await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name } });
    // Newest first: the oldest delivery is the last, and the only one tried (an endpoint's deliveries go in order).
    const waiting = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list.at(-1)?.attempts.length === 2,
    );
    expect(waiting.at(-1)!.attempts.map((attempt) => attempt.error)).toEqual([
      'connection refused',
      'connection refused',
    ]);
    expect(waiting.slice(0, -1).map((delivery) => delivery.attempts.length)).toEqual([0, 0, 0]);
    await receiver.start(port);
    const received = await receiver.waitFor(4);
    expect(received.map((request) => [request.event.type, request.event.data.name])).toEqual([
      ['user.created', user.name],
      ['user.updated', 'A'],
      ['user.updated', 'B'],
      ['user.updated', 'C'],
    ]);
  });

  it('an endpoint that keeps failing: disabled after ROWI_WEBHOOK_DISABLE_AFTER attempts, its pending deliveries dead-lettered', async () => {
    const endpoint = await endpointFor();
    receiver.behaviour = answer(503);
    for (let index = 0; index < 4; index++) await createUser(test);
    await eventually(
      async () => (await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}` })).json,
      (body) => body.enabled === false,
    );
    // The four users' deliveries go in parallel: attempts in flight when the seventh failure
    // disables the endpoint still end, and count (at most three more here).
    const deliveries = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list.every((delivery) => delivery.status === 'dead'),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const attempts = (await deliveriesOf(endpoint.id)).flatMap((delivery) => delivery.attempts);
    expect(attempts.length).toBeGreaterThanOrEqual(7);
    expect(attempts.length).toBeLessThanOrEqual(10);
    expect((await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}` })).json).toMatchObject({
      enabled: false,
      failed_attempts: attempts.length,
      disabled_reason: expect.stringContaining('7 failed attempts in a row'),
    });
    expect(deliveries.map((delivery) => delivery.status)).toEqual(['dead', 'dead', 'dead', 'dead']);
    // Nothing more is sent to a disabled endpoint; a ping or a retry by hand says why.
    await createUser(test);
    expectProblem(
      await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/ping` }),
      409,
      'endpoint-disabled',
    );
    expectProblem(
      await test.call({
        method: 'POST',
        url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${deliveries[0]!.id}/retry`,
      }),
      409,
      'endpoint-disabled',
    );
    // Refused, they stored nothing: no delivery for the ping, the dead one still dead.
    expect((await deliveriesOf(endpoint.id)).map((delivery) => [delivery.id, delivery.status])).toEqual(
      deliveries.map((delivery) => [delivery.id, 'dead']),
    );
    // Enabled again: the count starts over, and a dead delivery can be sent again by hand.
    receiver.behaviour = answer(200);
    const enabled = await test.call({
      method: 'PATCH',
      url: `/v1/webhook-endpoints/${endpoint.id}`,
      body: { enabled: true },
    });
    expect(enabled.json).toMatchObject({ enabled: true, failed_attempts: 0, disabled_reason: null });
    const retried = await test.call({
      method: 'POST',
      url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${deliveries[0]!.id}/retry`,
    });
    expect(retried.status).toBe(202);
    expect(retried.json.status).toBe('pending');
    const after = await eventually(
      () => deliveriesOf(endpoint.id),
      (list) => list.find((delivery) => delivery.id === deliveries[0]!.id)?.status === 'succeeded',
    );
    expect(after.find((delivery) => delivery.id === deliveries[0]!.id)!.attempts.at(-1)!.status_code).toBe(200);
    expectProblem(
      await test.call({
        method: 'POST',
        url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${deliveries[0]!.id + 100000}/retry`,
      }),
      404,
      'not-found',
    );
  });

  it('POST /v1/webhook-endpoints/{id}/deliveries/{id}/retry: 409 delivery-pending when the delivery is still being sent; the delivery unchanged', async () => {
    const endpoint = await endpointFor(['*']);
    // The receiver holds the attempt open past the time-out: the delivery stays pending meanwhile.
    receiver.behaviour = () => {};
    const ping = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/ping` });
    await receiver.waitFor(1);
    const before = (await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${ping.json.id}` })).json;
    expect(before).toMatchObject({ status: 'pending', attempts: [] });
    const refused = expectProblem(
      await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${ping.json.id}/retry` }),
      409,
      'delivery-pending',
    );
    expect(refused.detail).toContain(`Delivery ${ping.json.id} is still pending`);
    expect((await test.call({ url: `/v1/webhook-endpoints/${endpoint.id}/deliveries/${ping.json.id}` })).json).toEqual(
      before,
    );
  });

  it('POST /v1/webhook-endpoints/{id}/ping: 202 with the delivery; the endpoint gets a signed webhook.ping, and no other endpoint does', async () => {
    const endpoint = await endpointFor(['*']);
    const other = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      body: { url: receiver.url.replace('/hooks', '/other'), events: ['*'] },
    });
    const ping = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/ping` });
    expect(ping.status).toBe(202);
    expect(ping.headers.location).toBe(`/v1/webhook-endpoints/${endpoint.id}/deliveries/${ping.json.id}`);
    const [received] = await receiver.waitFor(1);
    expect(
      new Webhook(endpoint.secret).verify(received!.body, received!.headers as Record<string, string>),
    ).toMatchObject({ type: 'webhook.ping', data: { endpoint_id: endpoint.id } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received).toHaveLength(1);
    expect(await deliveriesOf(other.json.id)).toEqual([]);
  });

  it('POST /v1/webhook-endpoints/{id}/rotate-secret: both secrets sign during the overlap; 409 rotation-in-progress when rotated again', async () => {
    const endpoint = await endpointFor();
    const rotated = await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/rotate-secret` });
    expect(rotated.status).toBe(200);
    expect(rotated.json.secret).not.toBe(endpoint.secret);
    expect(Date.parse(rotated.json.previous_secret_expires_at)).toBeGreaterThan(Date.now() + 86_000_000);
    await createUser(test);
    const [received] = await receiver.waitFor(1);
    expect(String(received!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [endpoint.secret, rotated.json.secret])
      expect(new Webhook(secret).verify(received!.body, received!.headers as Record<string, string>)).toMatchObject({
        type: 'user.created',
      });
    const again = expectProblem(
      await test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/rotate-secret` }),
      409,
      'rotation-in-progress',
    );
    expect(again.previous_secret_expires_at).toBe(rotated.json.previous_secret_expires_at);
  });

  it('POST /v1/webhook-endpoints/{id}/rotate-secret twice at once: one 200, one 409, and the secret that 200 showed is the one that signs', async () => {
    const endpoint = await endpointFor();
    const replies = await Promise.all(
      [1, 2].map(() => test.call({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/rotate-secret` })),
    );
    expect(replies.map((reply) => reply.status).sort()).toEqual([200, 409]);
    const winner = replies.find((reply) => reply.status === 200)!.json.secret as string;
    await createUser(test);
    const [received] = await receiver.waitFor(1);
    expect(new Webhook(winner).verify(received!.body, received!.headers as Record<string, string>)).toMatchObject({
      type: 'user.created',
    });
  });

  it('a caller without orders:read: its endpoint for every type gets no order or stock events', async () => {
    const { key } = await createCallerWithKey(test, { role: 'admin', removed_scopes: ['orders:read', 'stock:read'] });
    const endpoint = await endpointFor(['*'], key);
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 3);
    expect(
      (
        await test.call({
          method: 'POST',
          url: '/v1/orders',
          body: { name: 'Hidden', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
        })
      ).status,
    ).toBe(201);
    await createUser(test);
    await receiver.waitFor(3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.map((request) => request.event.type)).toEqual([
      'user.created',
      'item.created',
      'user.created',
    ]);
    expect((await deliveriesOf(endpoint.id)).map((delivery) => delivery.event_type)).not.toContain('order.created');
    const asked = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      key,
      body: { url: receiver.url, events: ['order.created'] },
    });
    expect(expectProblem(asked, 422, 'validation-failed').errors).toEqual([
      expect.objectContaining({ pointer: '#/events/0', detail: expect.stringContaining('orders:read') }),
    ]);
  }, 15_000);
});

describe('webhook delivery with the default time-out (10 s)', () => {
  it('a receiver that answers 200 at once, then trickles its body: the delivery succeeds at its first attempt, decided about a second after the status', async () => {
    const app = await startApp({ ...SETTINGS, ROWI_WEBHOOK_TIMEOUT: '10000' });
    const trickling = await new Receiver().start();
    trickling.behaviour = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' }).write('o');
      const trickle = setInterval(() => response.write('k'), 100);
      response.on('close', () => clearInterval(trickle));
    };
    try {
      const created = await app.call({
        method: 'POST',
        url: '/v1/webhook-endpoints',
        body: { url: trickling.url, events: ['user.created'] },
      });
      expect(created.status).toBe(201);
      await createUser(app);
      const deliveries = await eventually(
        async () =>
          (await app.call({ url: `/v1/webhook-endpoints/${created.json.id}/deliveries` })).json.data as {
            status: string;
            attempts: { status_code: number | null; error: string | null; duration_ms: number }[];
          }[],
        (listed) => listed.length === 1 && listed[0]!.status !== 'pending',
        5000,
      );
      expect(deliveries[0]).toMatchObject({ status: 'succeeded', attempts: [{ status_code: 200, error: null }] });
      expect(deliveries[0]!.attempts[0]!.duration_ms).toBeLessThan(2000);
      expect(trickling.received).toHaveLength(1);
    } finally {
      await app.close();
      await trickling.stop();
    }
  });
});
