import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import {
  makeWorld,
  RESOURCES,
  type Named,
  type Row,
  type Viewer,
  type ViewerName,
  type World,
} from '../helpers/ownership.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { SseClient } from '../helpers/sse.js';
import { createEndpoint, deliveriesOf, WEBHOOK_SETTINGS } from '../helpers/webhooks.js';

/**
 * Record ownership on the paths that tell of changes (docs/access.md "Events, by record"): the
 * events list, the live stream and webhooks. Each viewer of the world (test/helpers/ownership.ts:
 * a caller that sees all records, one that sees its own, a channel, and a token of each acting for a
 * user) gets the events of exactly the records it sees, as the docs' rule says of the record the
 * event tells of; stock events only while it sees every order and item and acts for nobody.
 * Webhooks go to the callers (an endpoint acts for its owner, never for a user). Generated: every
 * viewer × every event. Runs on SQLite and on PostgreSQL (the fast-postgres project).
 */
let test: TestApp;
let world: World;
let origin: string;
/** The events every viewer's stream and endpoints should tell of: those after they opened. */
let before: Set<string>;
const streams = new Map<ViewerName, SseClient>();
const receivers = new Map<string, { receiver: Receiver; endpoint: number }>();
const WEBHOOK_OWNERS = ['warehouse', 'shop', 'channel'] as const;
const MARKER = 'the-last-change';

beforeAll(async () => {
  test = await startApp({ ...WEBHOOK_SETTINGS, ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  origin = await listenOnLoopback(test);
  world = await makeWorld(test);
  // The webhook owners may make endpoints (an endpoint acts for its owner, with the owner's record access).
  for (const owner of WEBHOOK_OWNERS) {
    const caller = (await test.call({ url: `/v1/callers/${world.callers[owner].id}` })).json;
    const granted = await test.call({
      method: 'PATCH',
      url: `/v1/callers/${world.callers[owner].id}`,
      body: { extra_scopes: [...caller.extra_scopes, 'webhook-endpoints:create', 'webhook-endpoints:read'] },
    });
    expect(granted.status, granted.text).toBe(200);
    const receiver = await new Receiver().start();
    const endpoint = await createEndpoint(test, receiver, ['*'], world.callers[owner].key);
    receivers.set(owner, { receiver, endpoint: endpoint.id });
  }
  for (const viewer of world.viewers) {
    const stream = await SseClient.open(`${origin}/v1/events/stream`, {
      ...viewer.credentials.headers,
      ...(viewer.credentials.key ? { 'x-api-key': viewer.credentials.key } : {}),
    });
    expect([viewer.name, stream.response.statusCode]).toEqual([viewer.name, 200]);
    streams.set(viewer.name, stream);
  }
  before = new Set(((await test.call({ url: '/v1/events?limit=500' })).json.data as Row[]).map((event) => event.id));

  // Changes of every kind of record, by the admin: a change of each, the stock of each item, an order for each acting user.
  for (const resource of RESOURCES)
    for (const record of world.records[resource].filter((named) => !named.deleted)) {
      const changed = await test.call({
        method: 'PATCH',
        url: `/v1/${resource}/${record.row.id}`,
        body: { name: `${record.row.name} (changed)` },
      });
      expect(changed.status, changed.text).toBe(200);
    }
  for (const item of world.records.items.filter((named) => !named.deleted))
    await test.call({ method: 'PUT', url: `/v1/items/${item.row.id}/stock`, body: { quantity: 200 } });
  for (const user of [world.users.ada, world.users.cleo])
    await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: {
        name: `admin-for-${user.name}`,
        user_id: user.id,
        lines: [{ item_id: world.sharedItem.id, quantity: 1 }],
      },
    });
  // Last, a change every viewer sees: the shared item (the shop's; every viewer sees it).
  await test.call({ method: 'PATCH', url: `/v1/items/${world.sharedItem.id}`, body: { name: MARKER } });
});
afterAll(async () => {
  for (const stream of streams.values()) stream.close();
  for (const { receiver } of receivers.values()) await receiver.stop();
  await test?.close();
});

/** What every record of the world is, by its path (a deletion's event holds only the id). */
const recordAt = (path: string): Named | undefined => {
  const [, , resource, id] = path.split('/');
  return world.records[resource as Named['resource']]?.find((record) => String(record.row.id) === id);
};

/**
 * Whether the viewer gets the event, as the docs say: of users, items and orders, the events of the
 * records it sees (by the record as the event tells it); stock events only while it sees every
 * order and every item and acts for nobody; none of the resources it may not read.
 */
function shown(viewer: Pick<Viewer, 'caller' | 'acting' | 'scopes'> & { name: string }, event: Row): boolean {
  const resource = event.path.split('/')[2];
  if (event.type.startsWith('stock.')) {
    const seesEvery = (['orders', 'items'] as const).every((owned) =>
      world.records[owned].every((record) => world.sees(viewer as Viewer, owned, record.row)),
    );
    return viewer.scopes.has('stock:read') && viewer.acting === null && seesEvery;
  }
  if (!(RESOURCES as readonly string[]).includes(resource)) return false;
  const row = event.type.endsWith('.deleted') ? recordAt(event.path)!.row : event.data;
  return world.sees(viewer as Viewer, resource as Named['resource'], row);
}

const VIEWERS: ViewerName[] = ['warehouse', 'warehouse-acting', 'shop', 'shop-acting', 'channel', 'channel-acting'];
const viewerOf = (name: ViewerName) => world.viewers.find((viewer) => viewer.name === name)!;
const allEvents = async () => (await test.call({ url: '/v1/events?limit=500' })).json.data as Row[];

describe('events: every viewer × every event', () => {
  it.each(VIEWERS)(
    'GET /v1/events: every page %s reads holds exactly the events of the records it sees',
    async (name) => {
      const viewer = viewerOf(name);
      const expected = (await allEvents()).filter((event) => shown(viewer, event)).map((event) => event.id);
      const ids: string[] = [];
      let url: string | undefined = '/v1/events?limit=7';
      for (let page = 0; url !== undefined && page < 80; page++) {
        const reply = await test.call({ url, ...viewer.credentials });
        expect(reply.status, reply.text).toBe(200);
        ids.push(...reply.json.data.map((event: Row) => event.id));
        url =
          reply.json.next_cursor === null
            ? undefined
            : `/v1/events?limit=7&cursor=${encodeURIComponent(reply.json.next_cursor)}`;
      }
      expect(ids).toEqual(expected);
      expect(ids.length).toBeGreaterThan(0);
    },
  );

  it.each(VIEWERS)('GET /v1/events/{id}: 200 for each event %s sees, 404 as for none for each other', async (name) => {
    const viewer = viewerOf(name);
    const never = await test.call({ url: `/v1/events/evt_${'0'.repeat(28)}`, ...viewer.credentials });
    for (const event of await allEvents()) {
      const reply = await test.call({ url: `/v1/events/${event.id}`, ...viewer.credentials });
      if (shown(viewer, event)) expect([event.type, reply.status]).toEqual([event.type, 200]);
      else
        expect([event.type, reply.status, reply.json.detail]).toEqual([
          event.type,
          404,
          never.json.detail.replace(`evt_${'0'.repeat(28)}`, event.id),
        ]);
    }
  });

  it.each(VIEWERS)(
    'GET /v1/events/stream: %s is streamed exactly the events of the records it sees, in order',
    async (name) => {
      const viewer = viewerOf(name);
      const stream = streams.get(name)!;
      const arrived = await stream.waitUntil((event) => event.data.data.name === MARKER, 10_000);
      expect(arrived).toBe(true);
      // Event ids sort in the order the events were committed, the order a stream sends them in.
      const expected = (await allEvents())
        .filter((event) => !before.has(event.id) && shown(viewer, event))
        .map((event) => event.id)
        .sort();
      expect(stream.events.map((event) => event.data.id)).toEqual(expected);
      expect(expected.length).toBeGreaterThan(0);
    },
  );

  it.each(WEBHOOK_OWNERS)(
    'webhooks: the endpoint %s owns is sent exactly the events of the records it sees (an endpoint acts for its owner)',
    async (owner) => {
      const { receiver, endpoint } = receivers.get(owner)!;
      await receiver.waitFor(1, 10_000, (received) => received.event.data.name === MARKER);
      await eventually(
        () => deliveriesOf(test, endpoint),
        (deliveries) => deliveries.every((delivery) => delivery.status !== 'pending'),
      );
      const viewer = viewerOf(owner);
      const expected = (await allEvents())
        .filter((event) => !before.has(event.id) && shown(viewer, event))
        .map((event) => event.id)
        .sort();
      // Delivery is at least once: a retried event is the same event.
      expect([...new Set(receiver.received.map((received) => received.event.id))].sort()).toEqual(expected);
    },
  );
});
