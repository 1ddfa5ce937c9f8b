import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { BULKY_LINES, bulkyOrders, eventsMadeAfter, SseClient } from '../helpers/sse.js';

/**
 * A stream that reads gets everything, however far past ROWI_EVENTS_STREAM_BUFFER (here its least,
 * 16 KiB) the events it is owed go: it takes events while less than the bound waits unsent, and the
 * rest wait in the outbox until its client has read, instead of piling up in memory or cutting the
 * client off. A reconnect with Last-Event-ID after much was missed, and a client that pauses
 * between reads, both get every event once, in order, and keep their connection.
 */
const BOUND = 16_384;
let test: TestApp;
let base: string;
let placeBulkyOrder: () => Promise<number>;

beforeAll(async () => {
  test = await startApp({ ROWI_EVENTS_STREAM_BUFFER: String(BOUND), ROWI_EVENTS_HEARTBEAT: '1' });
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  placeBulkyOrder = await bulkyOrders(test);
});
afterAll(() => test.close());

const eventIdsAfter = async (afterId: string) => (await eventsMadeAfter(test, afterId)).map((event) => event.id);

describe('GET /v1/events/stream past ROWI_EVENTS_STREAM_BUFFER', () => {
  it('GET /v1/events/stream with Last-Event-ID: every event missed (30 times the bound), once and in order, on a connection that stays open, when the client reads', async () => {
    const [last] = (await test.call({ url: '/v1/events?limit=1' })).json.data;
    for (let index = 0; index < 10; index++) await placeBulkyOrder();
    const expected = await eventIdsAfter(last.id);
    expect(expected).toHaveLength(10 * (BULKY_LINES + 1));
    const stream = await SseClient.open(`${base}/v1/events/stream`, {
      'x-api-key': test.adminKey,
      'last-event-id': last.id,
    });
    await stream.waitFor(expected.length, 20_000);
    expect(stream.events.map((event) => event.id)).toEqual(expected);
    expect(stream.closed).toBe(false);
    stream.close();
  });

  it('GET /v1/events/stream: every event of a burst (30 times the bound), once and in order, on a connection that stays open, when the client pauses between reads', async () => {
    const [last] = (await test.call({ url: '/v1/events?limit=1' })).json.data;
    const stream = await SseClient.open(`${base}/v1/events/stream`, { 'x-api-key': test.adminKey });
    stream.response.on('data', () => {
      stream.response.pause();
      setTimeout(() => stream.response.resume(), 3);
    });
    for (let index = 0; index < 10; index++) await placeBulkyOrder();
    const expected = await eventIdsAfter(last.id);
    await stream.waitFor(expected.length, 30_000);
    expect(stream.events.map((event) => event.id)).toEqual(expected);
    expect(stream.closed).toBe(false);
    stream.close();
  });
});
