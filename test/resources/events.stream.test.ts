import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { Receiver } from '../helpers/receiver.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { SseClient } from '../helpers/sse.js';

let test: TestApp;
let base: string;
beforeAll(async () => {
  test = await startApp({
    ROWI_EVENTS_HEARTBEAT: '1',
    ROWI_EVENTS_MAX_STREAMS: '3',
    ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  });
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => test.close());

const open = (query = '', headers: Record<string, string> = {}) =>
  SseClient.open(`${base}/v1/events/stream${query}`, { 'x-api-key': test.adminKey, ...headers });

describe('GET /v1/events/stream', () => {
  it('GET /v1/events/stream: 200 text/event-stream; each event committed from then on, with its id, type and the event as JSON', async () => {
    const stream = await open();
    expect(stream.response.statusCode).toBe(200);
    expect(stream.response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.response.headers['cache-control']).toBe('no-store');
    const { user } = await createUser(test);
    const [event] = await stream.waitFor(1);
    expect(event).toMatchObject({
      event: 'user.created',
      data: { type: 'user.created', path: `/v1/users/${user.id}`, data: { id: user.id } },
    });
    expect(event!.id).toBe(event!.data.id);
    expect((await test.call({ url: `/v1/events/${event!.id}` })).json).toEqual(event!.data);
    expect(stream.retry).toBe(2000);
    stream.close();
  });

  it('GET /v1/events/stream with Last-Event-ID: every event after it, once, nothing missed across the reconnect', async () => {
    const stream = await open();
    await createUser(test);
    const [first] = await stream.waitFor(1);
    stream.close();
    const missed = [];
    for (let index = 0; index < 3; index++) missed.push((await createUser(test)).user.id);
    const resumed = await open('', { 'last-event-id': first!.id });
    const { user: live } = await createUser(test);
    await resumed.waitFor(4);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(resumed.events.map((event) => event.data.data.id)).toEqual([...missed, live.id]);
    resumed.close();
  });

  it('GET /v1/events/stream?types=: only those types; 400 for a type that does not exist', async () => {
    const stream = await open('?types=item.created,item.deleted');
    await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 4);
    expect((await test.call({ method: 'DELETE', url: `/v1/items/${item.id}` })).status).toBe(204);
    const events = await stream.waitFor(2);
    expect(events.map((event) => event.event)).toEqual(['item.created', 'item.deleted']);
    stream.close();
    const bad = await open('?types=item.created,item.melted');
    expect(bad.response.statusCode).toBe(400);
    expect(JSON.parse(await bad.text())).toMatchObject({ type: '/problems/invalid-query' });
  });

  it('GET /v1/events/stream: a caller without orders:read sees user events but no order or stock events', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['orders:read', 'stock:read'] });
    const stream = await open('', { 'x-api-key': key });
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 2);
    expect(
      (
        await test.call({
          method: 'POST',
          url: '/v1/orders',
          body: { name: 'Unseen', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
        })
      ).status,
    ).toBe(201);
    const { user: last } = await createUser(test);
    await stream.waitFor(3);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stream.events.map((event) => event.event)).toEqual(['user.created', 'item.created', 'user.created']);
    expect(stream.events.at(-1)!.data.data.id).toBe(last.id);
    stream.close();
  });

  it('GET /v1/events/stream: a comment every ROWI_EVENTS_HEARTBEAT seconds while idle', async () => {
    const stream = await open();
    await new Promise((resolve) => setTimeout(resolve, 2300));
    expect(stream.comments).toBeGreaterThanOrEqual(2);
    expect(stream.ended).toBe(false);
    stream.close();
  });

  it('GET /v1/events/stream: 429 too-many-streams past ROWI_EVENTS_MAX_STREAMS for one caller; another caller is not counted; a closed stream frees its place', async () => {
    const streams = await Promise.all([open(), open(), open()]);
    const refused = await open();
    expect(refused.response.statusCode).toBe(429);
    expect(refused.response.headers['retry-after']).toBe('10');
    expect(JSON.parse(await refused.text())).toMatchObject({ type: '/problems/too-many-streams', status: 429 });
    const { key } = await createCallerWithKey(test, { role: 'reader' });
    const other = await open('', { 'x-api-key': key });
    expect(other.response.statusCode).toBe(200);
    other.close();
    streams[0]!.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const again = await open();
    expect(again.response.statusCode).toBe(200);
    for (const stream of [...streams, again]) stream.close();
  });

  it('GET /v1/events/stream: 410 last-event-unknown for a Last-Event-ID of no kept event; 400 for one that is no event id', async () => {
    const unknown = await open('', { 'last-event-id': `evt_${'0'.repeat(28)}` });
    expect(unknown.response.statusCode).toBe(410);
    expect(JSON.parse(await unknown.text())).toMatchObject({ type: '/problems/last-event-unknown' });
    const malformed = await open('', { 'last-event-id': 'yesterday' });
    expect(malformed.response.statusCode).toBe(400);
    expect(JSON.parse(await malformed.text())).toMatchObject({ type: '/problems/invalid-header' });
  });

  it("HEAD /v1/events/stream: 200 with the stream's media type, and the answer ends", async () => {
    const reply = await test.call({ method: 'HEAD', url: '/v1/events/stream' });
    expect(reply.status).toBe(200);
    expect(String(reply.headers['content-type'])).toMatch(/^text\/event-stream/);
  });
});

describe('300 concurrent orders', () => {
  it('POST /v1/orders ×300 at once, stock for 200: exactly one order.created per 201, on the stream and at a webhook alike, none for a 409', async () => {
    const receiver = await new Receiver().start();
    const endpoint = await test.call({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      body: { url: receiver.url, events: ['order.created'] },
    });
    expect(endpoint.status).toBe(201);
    const stream = await open('?types=order.created');
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 200);
    const replies = await Promise.all(
      Array.from({ length: 300 }, (_, index) =>
        test.call({
          method: 'POST',
          url: '/v1/orders',
          body: { name: `Burst ${index}`, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
        }),
      ),
    );
    const placed = replies
      .filter((reply) => reply.status === 201)
      .map((reply) => reply.json.id as number)
      .sort((a, b) => a - b);
    expect(placed).toHaveLength(200);
    expect(replies.filter((reply) => reply.status === 409)).toHaveLength(100);
    const streamed = await stream.waitFor(200, 20_000);
    const hooked = await receiver.waitFor(200, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stream.events).toHaveLength(200);
    expect(receiver.received).toHaveLength(200);
    expect(streamed.map((event) => event.data.data.id as number).sort((a, b) => a - b)).toEqual(placed);
    expect(hooked.map((request) => request.event.data.id as number).sort((a, b) => a - b)).toEqual(placed);
    stream.close();
    await receiver.stop();
  }, 60_000);
});
