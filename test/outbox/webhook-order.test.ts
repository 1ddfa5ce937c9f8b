import type { ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { answer, eventually, Receiver, type Received } from '../helpers/receiver.js';
import { createItem, createUser } from '../helpers/records.js';
import { createEndpoint, deliveriesOf } from '../helpers/webhooks.js';

/**
 * Webhook deliveries in order per resource, in parallel across resources (docs/events.md,
 * "Order"): on both databases.
 */
const SETTINGS = {
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  // Retries 2 s apart: a failing resource stays failing while the others' events arrive, even on a busy machine.
  ROWI_WEBHOOK_RETRY_SCHEDULE: '2,2',
  ROWI_WEBHOOK_TIMEOUT: '5000',
  ROWI_WEBHOOK_DISABLE_AFTER: '1000',
  ROWI_WEBHOOK_CONCURRENCY: '8',
};

type Body = Received['event'] & { resource: string; sequence: number };
const bodyOf = (received: Received) => received.event as Body;

let test: TestApp;
const receivers: Receiver[] = [];
beforeAll(async () => {
  test = await startApp(SETTINGS);
});
afterAll(() => test.close());
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.stop()));
  for (const endpoint of (await test.call({ url: '/v1/webhook-endpoints?limit=500' })).json.data)
    await test.call({ method: 'DELETE', url: `/v1/webhook-endpoints/${endpoint.id}` });
});

async function receiver(): Promise<Receiver> {
  const started = await new Receiver().start();
  receivers.push(started);
  return started;
}

const rename = (id: number, name: string) => test.call({ method: 'PATCH', url: `/v1/users/${id}`, body: { name } });

/** A user, and an endpoint for user.updated whose receiver answers 500 to that user's events (204 to others) until `recover()`. */
async function failingForOneUser() {
  const hooks = await receiver();
  let failing = true;
  const { user: bad } = await createUser(test);
  hooks.behaviour = (request, response, received) =>
    answer(failing && bodyOf(received).resource === `/v1/users/${bad.id}` ? 500 : 204)(request, response, received);
  const endpoint = await createEndpoint(test, hooks, ['user.updated']);
  return { hooks, bad, endpoint, recover: () => (failing = false) };
}

/** The received events of each resource, in the order they arrived. */
function byResource(received: Received[]): Map<string, Body[]> {
  const map = new Map<string, Body[]>();
  for (const request of received) {
    const body = bodyOf(request);
    map.set(body.resource, [...(map.get(body.resource) ?? []), body]);
  }
  return map;
}

describe('webhook order: per resource, resources in parallel', () => {
  it('six users changed five times each, a receiver that answers after 0 to 30 ms: deliveries overlap, yet each user’s events arrive in commit order, numbered 1 to 6', async () => {
    const hooks = await receiver();
    let open = 0;
    let mostOpen = 0;
    hooks.behaviour = (_request, response: ServerResponse) => {
      mostOpen = Math.max(mostOpen, ++open);
      setTimeout(
        () => {
          open--;
          response.writeHead(204).end();
        },
        Math.floor(Math.random() * 30),
      );
    };
    await createEndpoint(test, hooks, ['user.created', 'user.updated']);
    const users = [];
    for (let index = 0; index < 6; index++) users.push((await createUser(test)).user);
    for (let round = 1; round <= 5; round++)
      for (const user of users) expect((await rename(user.id, `${user.name} ${round}`)).status).toBe(200);
    await hooks.waitFor(36, 15_000);
    expect(mostOpen).toBeGreaterThan(1);
    const resources = byResource(hooks.received);
    expect([...resources.keys()].sort()).toEqual(users.map((user) => `/v1/users/${user.id}`).sort());
    for (const user of users) {
      const events = resources.get(`/v1/users/${user.id}`)!;
      expect(events.map((event) => [event.type, event.data.name])).toEqual([
        ['user.created', user.name],
        ...[1, 2, 3, 4, 5].map((round) => ['user.updated', `${user.name} ${round}`]),
      ]);
      expect(events.map((event) => event.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
    }
  });

  it("an item's stock is its item: item.created and stock.changed share the resource /v1/items/{id} and its numbering, which the deliveries list shows", async () => {
    const hooks = await receiver();
    const endpoint = await createEndpoint(test, hooks, ['item.created', 'stock.changed']);
    const { item } = await createItem(test);
    for (const quantity of [5, 7, 9])
      expect((await test.call({ method: 'PUT', url: `/v1/items/${item.id}/stock`, body: { quantity } })).status).toBe(
        200,
      );
    await hooks.waitFor(4);
    expect(
      hooks.received.map((request) => [bodyOf(request).type, bodyOf(request).resource, bodyOf(request).sequence]),
    ).toEqual([
      ['item.created', `/v1/items/${item.id}`, 1],
      ['stock.changed', `/v1/items/${item.id}`, 2],
      ['stock.changed', `/v1/items/${item.id}`, 3],
      ['stock.changed', `/v1/items/${item.id}`, 4],
    ]);
    // GET …/deliveries (newest first): each delivery's resource and sequence, as its webhook carried them.
    const listed = await deliveriesOf(test, endpoint.id);
    expect(listed.map((delivery) => [delivery.event_id, delivery.resource, delivery.sequence])).toEqual(
      [...hooks.received]
        .reverse()
        .map((request) => [request.event.id, bodyOf(request).resource, bodyOf(request).sequence]),
    );
  });

  it('a poison event (a receiver that answers 500 to one user’s user.created): only that user’s later events wait; the others arrive at once; after its dead letter the rest follow, in order, the gap visible in the sequence', async () => {
    const hooks = await receiver();
    let poisoned = '';
    hooks.behaviour = (request, response, received) =>
      // The poison event: one event the receiver cannot take (its user's later ones it can).
      answer(bodyOf(received).resource === poisoned && received.event.type === 'user.created' ? 500 : 204)(
        request,
        response,
        received,
      );
    const endpoint = await createEndpoint(test, hooks, ['user.created', 'user.updated']);
    const { user: bad } = await createUser(test);
    poisoned = `/v1/users/${bad.id}`;
    const { user: good } = await createUser(test);
    for (const name of ['B1', 'B2']) await rename(bad.id, name);
    for (const name of ['G1', 'G2', 'G3']) await rename(good.id, name);

    // The good user's four events arrive while the bad one's first is still being retried.
    const goodOnes = await hooks.waitFor(4, 5000, (received) => bodyOf(received).resource === `/v1/users/${good.id}`);
    expect(goodOnes.map((received) => bodyOf(received).data.name)).toEqual([good.name, 'G1', 'G2', 'G3']);
    const whileFailing = hooks.received.filter((received) => bodyOf(received).resource === poisoned);
    expect(whileFailing.length).toBeGreaterThanOrEqual(1);
    expect(new Set(whileFailing.map((received) => bodyOf(received).type))).toEqual(new Set(['user.created']));

    // Three attempts, then its dead letter: B1 and B2 follow, numbered 2 and 3 (a receiver sees that 1 is missing).
    const deliveries = await eventually(
      () => deliveriesOf(test, endpoint.id),
      (list) => list.some((delivery) => delivery.status === 'dead'),
    );
    const dead = deliveries.filter((delivery) => delivery.status === 'dead');
    expect(dead).toHaveLength(1);
    expect(dead[0]!.attempts.map((attempt) => attempt.status_code)).toEqual([500, 500, 500]);
    const badOnes = await hooks.waitFor(5, 10_000, (received) => bodyOf(received).resource === `/v1/users/${bad.id}`);
    expect(badOnes.map((received) => [bodyOf(received).data.name, bodyOf(received).sequence])).toEqual([
      [bad.name, 1],
      [bad.name, 1],
      [bad.name, 1],
      ['B1', 2],
      ['B2', 3],
    ]);
  });

  it('a receiver that answers 500 to one user’s events stays behind by itself: the later events of that user are not attempted until it succeeds, then arrive in order', async () => {
    const { hooks, bad, endpoint, recover } = await failingForOneUser();
    for (const name of ['X1', 'X2', 'X3']) await rename(bad.id, name);
    const waiting = await eventually(
      () => deliveriesOf(test, endpoint.id),
      (list) => list.length === 3 && list.at(-1)!.attempts.length >= 1,
    );
    // Newest first: the two later ones were not tried.
    expect(waiting.slice(0, 2).map((delivery) => [delivery.status, delivery.attempts.length])).toEqual([
      ['pending', 0],
      ['pending', 0],
    ]);
    recover();
    await hooks.waitFor(1, 5000, (received) => bodyOf(received).data.name === 'X3');
    const names = hooks.received.map((received) => bodyOf(received).data.name);
    // The first may have been tried more than once; each name arrives after the ones before it.
    expect(names.filter((name, index) => names.indexOf(name) === index)).toEqual(['X1', 'X2', 'X3']);
  });

  it('an event of a user whose earlier event waits for its retry, written while the endpoint is idle: not attempted before that one succeeds', async () => {
    const { hooks, bad, endpoint, recover } = await failingForOneUser();
    await rename(bad.id, 'Y1');
    // Its first attempt failed and is written: it waits for its retry (2 s).
    await eventually(
      () => deliveriesOf(test, endpoint.id),
      (list) => list.length === 1 && list[0]!.attempts.length === 1 && list[0]!.status === 'pending',
    );
    await rename(bad.id, 'Y2');
    const { user: other } = await createUser(test);
    await rename(other.id, 'Z1');
    // Another user's event goes at once; Y2 waits behind Y1.
    await hooks.waitFor(1, 5000, (received) => bodyOf(received).data.name === 'Z1');
    const list = await deliveriesOf(test, endpoint.id);
    const y2 = list.find((delivery) => delivery.resource === `/v1/users/${bad.id}` && delivery.sequence === 2);
    expect([y2?.status, y2?.attempts.length]).toEqual(['pending', 0]);
    expect(hooks.received.filter((received) => bodyOf(received).data.name === 'Y2')).toEqual([]);
    recover();
    await hooks.waitFor(1, 5000, (received) => bodyOf(received).data.name === 'Y2');
    const names = hooks.received.map((received) => bodyOf(received).data.name).filter((name) => name !== 'Z1');
    expect(names.filter((name, index) => names.indexOf(name) === index)).toEqual(['Y1', 'Y2']);
  });

  it('thirty users whose first delivery fails once, each changed three times right behind it: no user’s later event arrives before its earlier ones were answered 2xx (the failure races the later deliveries’ claim)', async () => {
    const hooks = await receiver();
    const failed = new Set<string>();
    // By resource: the highest sequence answered 2xx.
    const answered = new Map<string, number>();
    const early: string[] = [];
    hooks.behaviour = (request, response, received) => {
      const { resource, sequence } = bodyOf(received);
      const done = answered.get(resource) ?? 0;
      if (sequence > done + 1) early.push(`${resource} #${sequence} before #${done + 1} was answered`);
      if (sequence === 1 && !failed.has(resource)) {
        failed.add(resource);
        answer(500)(request, response, received);
        return;
      }
      answered.set(resource, Math.max(done, sequence));
      answer(204)(request, response, received);
    };
    await createEndpoint(test, hooks, ['user.created', 'user.updated']);
    const users = await Promise.all(
      Array.from({ length: 30 }, async (_, index) => {
        const { user } = await createUser(test);
        for (const name of ['A', 'B', 'C']) await rename(user.id, `${name}${index}`);
        return `/v1/users/${user.id}`;
      }),
    );
    await eventually(
      async () => users.map((resource) => answered.get(resource)),
      (sequences) => sequences.every((sequence) => sequence === 4),
      15_000,
    );
    expect(early).toEqual([]);
    expect(failed.size).toBe(30);
  });
});

describe('webhook fairness: endpoints do not wait for each other', () => {
  it('40 endpoints at a receiver that never answers: a healthy endpoint still gets every event within a moment of its commit', async () => {
    const hung = await receiver();
    hung.behaviour = () => {}; // accepts the request, never answers (the 5 s time-out frees the slot)
    const healthy = await receiver();
    for (let index = 0; index < 40; index++) await createEndpoint(test, hung, ['user.created']);
    await createEndpoint(test, healthy, ['user.created']);
    const lags: number[] = [];
    for (let index = 0; index < 6; index++) {
      const committed = Date.now();
      const { user } = await createUser(test);
      const [arrived] = await healthy.waitFor(
        1,
        5000,
        (received) => received.event.type === 'user.created' && received.event.data.id === user.id,
      );
      lags.push(arrived!.at - committed);
      // Spread over the hung endpoints' time-outs and retries.
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(hung.received.length).toBeGreaterThanOrEqual(40);
    // A moment: half a time-out of the hung endpoints' (5 s) at most, each time, however loaded the
    // machine (one shared sending slot, as before, made it wait for whole time-outs).
    expect(Math.max(...lags), `lags ${lags.join(', ')} ms`).toBeLessThan(2500);
  });
});
