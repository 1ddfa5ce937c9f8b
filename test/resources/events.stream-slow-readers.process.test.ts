import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BACKEND, itOnce } from '../helpers/database.js';
import { sample } from '../helpers/metrics.js';
import { callServer, serverPool, type RunningServer } from '../helpers/process.js';
import { openUnreadStream, SseClient, type UnreadStream } from '../helpers/sse.js';

/**
 * Event-stream clients that stop reading, against the built CLI over real sockets: what one stream
 * may hold unsent is bounded (ROWI_EVENTS_STREAM_BUFFER), a client that takes nothing for two
 * heartbeat intervals has its connection reset (and stops counting against
 * ROWI_EVENTS_MAX_STREAMS only then), a client that reads gets everything whatever the bound, and
 * a shutdown with such streams open ends promptly and cleanly, with and without --workers.
 */
const servers = serverPool();
afterEach(() => servers.killAll());

const LINES = 100;
const BOUND = 65_536;

const api = callServer;

/** A user and LINES items in stock: each order on them makes about 50 KB of events (the order and a stock move per line). */
async function catalogue(server: RunningServer): Promise<() => Promise<void>> {
  const user = await api(server, 'POST', '/v1/users', {
    name: 'Slow reader',
    email: `slow.${process.pid}@example.com`,
  });
  const items: number[] = [];
  for (let index = 0; index < LINES; index++) {
    const item = await api(server, 'POST', '/v1/items', {
      name: `Bulky item ${index} ${'x'.repeat(150)}`,
      sku: `SLOW-${index}-${process.pid}`,
      price: '1.00',
    });
    expect((await api(server, 'PUT', `/v1/items/${item.json.id}/stock`, { quantity: 1_000_000 })).status).toBe(200);
    items.push(item.json.id);
  }
  return async () => {
    const order = await api(server, 'POST', '/v1/orders', {
      name: 'Bulk',
      user_id: user.json.id,
      lines: items.map((item_id) => ({ item_id, quantity: 1 })),
    });
    expect(order.status).toBe(201);
  };
}

/** Places orders until `done` says so (at most `most`). */
async function placeOrdersUntil(
  placeOrder: () => Promise<void>,
  done: () => boolean | Promise<boolean>,
  most: number,
): Promise<number> {
  let placed = 0;
  while (placed < most && !(await done())) {
    await Promise.all([placeOrder(), placeOrder(), placeOrder(), placeOrder()]);
    placed += 4;
  }
  return placed;
}

/** The warnings the server logged for each stream it cut off. */
function slowReaderCuts(server: RunningServer): { unsent: number; bound: number; stalled_ms: number }[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.includes('event stream client took nothing of what waits for it'))
    .map((line) => JSON.parse(line) as { unsent: number; bound: number; stalled_ms: number });
}

/** The bytes of the largest event the stream sent, as a frame (id, event and data lines). */
async function largestFrame(server: RunningServer): Promise<number> {
  const [event] = (await api(server, 'GET', '/v1/events?type=order.created&limit=1')).json.data;
  return Buffer.byteLength(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

const metric = async (server: RunningServer, name: string, labels: Record<string, string> = {}) => {
  const reply = await fetch(`${server.baseUrl}/metrics`, { headers: { 'x-api-key': server.adminKey } });
  return sample(await reply.text(), name, labels);
};

describe('event streams whose clients stop reading', () => {
  it(
    'GET /v1/events/stream: a client that never reads is cut off two heartbeats after ROWI_EVENTS_STREAM_BUFFER is unsent, holding no more than that and one event, counts against ROWI_EVENTS_MAX_STREAMS until then only; a stream that reads gets every event',
    { timeout: 120_000 },
    async () => {
      const server = await servers.serve({
        env: { ROWI_EVENTS_MAX_STREAMS: '2', ROWI_EVENTS_STREAM_BUFFER: String(BOUND), ROWI_EVENTS_HEARTBEAT: '1' },
      });
      const placeOrder = await catalogue(server);
      const unread: UnreadStream[] = [];
      for (let index = 0; index < 2; index++)
        unread.push(await openUnreadStream(server.baseUrl, { 'x-api-key': server.adminKey }));
      expect(unread.map((stream) => stream.head.split('\r\n')[0])).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
      const refused = await openUnreadStream(server.baseUrl, { 'x-api-key': server.adminKey });
      expect(refused.head.split('\r\n')[0]).toBe('HTTP/1.1 429 Too Many Requests');
      refused.socket.destroy();
      // Another caller's stream, which reads, all of it: far more than the bound at a time.
      const reader = await api(server, 'POST', '/v1/callers', { name: 'reading-dashboard', role: 'reader' });
      const readerKey = (await api(server, 'POST', `/v1/callers/${reader.json.id}/keys`, {})).json.key as string;
      const reading = await SseClient.open(`${server.baseUrl}/v1/events/stream`, { 'x-api-key': readerKey });

      const placed = await placeOrdersUntil(placeOrder, () => slowReaderCuts(server).length >= 2, 600);
      const cuts = slowReaderCuts(server);
      expect(cuts).toHaveLength(2);
      // What each held unsent: never more than the bound and one event (and the chunked encoding's few bytes an event).
      const most = BOUND + (await largestFrame(server)) + 4096;
      for (const cut of cuts)
        expect({ ...cut, within: cut.unsent <= most }).toMatchObject({
          unsent: expect.any(Number),
          bound: BOUND,
          stalled_ms: 2000,
          within: true,
        });
      // The server has let go of both connections: only the reading stream is open, and the caller may open streams again.
      expect(await metric(server, 'rowi_event_streams_open')).toBe(1);
      expect(await metric(server, 'rowi_event_streams_ended_total', { reason: 'slow_reader' })).toBe(2);
      const again = await SseClient.open(`${server.baseUrl}/v1/events/stream`, { 'x-api-key': server.adminKey });
      expect(again.response.statusCode).toBe(200);
      again.close();
      // Their clients, reading at last, find the connection closed.
      await Promise.all(unread.map((stream) => stream.resume()));
      // The reading stream got every event, once, in commit order (on PostgreSQL orders placed at once need not commit in the order of their ids).
      const orders = await reading
        .waitFor(placed * (LINES + 1), 60_000)
        .then((events) => events.filter((event) => event.event === 'order.created'));
      expect(orders.map((event) => event.data.data.id as number).sort((a, b) => a - b)).toEqual(
        Array.from({ length: placed }, (_, index) => index + 1),
      );
      expect(new Set(reading.events.map((event) => event.id)).size).toBe(reading.events.length);
      expect(reading.closed).toBe(false);
      reading.close();
      expect(await server.stop()).toBe(0);
    },
  );

  // The shutdown is the same whatever the database: on PostgreSQL (its own listener of commits) the
  // run with workers only.
  for (const workers of [1, 2]) {
    it.runIf(BACKEND === 'sqlite' || workers > 1)(
      `SIGTERM: exit code 0 within seconds, not the shutdown time-out, with streams open whose clients do not read${workers > 1 ? ` (--workers ${workers})` : ''}; a reading stream gets stream.ended (503)`,
      { timeout: 120_000 },
      async () => {
        const server = await servers.serve({
          args: ['--workers', String(workers)],
          env: { ROWI_SHUTDOWN_TIMEOUT: '20000', ROWI_EVENTS_MAX_STREAMS: '10' },
        });
        const placeOrder = await catalogue(server);
        // New connections go to the workers in turn: four streams are on both.
        const unread: UnreadStream[] = [];
        for (let index = 0; index < 4; index++)
          unread.push(await openUnreadStream(server.baseUrl, { 'x-api-key': server.adminKey }));
        const reading = await SseClient.open(`${server.baseUrl}/v1/events/stream`, { 'x-api-key': server.adminKey });
        let bytes = 0;
        reading.response.on('data', (chunk: string) => (bytes += Buffer.byteLength(chunk)));
        // More than the operating system and the bound hold for a client that does not read: no last
        // event can pass what waits (and the streams are not cut before two heartbeats, 30 s).
        await placeOrdersUntil(placeOrder, () => bytes > 6 * 1024 * 1024, 1000);
        expect(slowReaderCuts(server)).toEqual([]);

        const stopping = performance.now();
        const code = await server.stop('SIGTERM');
        const tookMs = performance.now() - stopping;
        expect(code).toBe(0);
        expect(tookMs).toBeLessThan(10_000);
        expect(reading.endedWith).toMatchObject({ status: 503, type: '/problems/service-unavailable' });
        expect(server.stdout()).not.toMatch(/did not start in time|AVV_ERR|were cut/);
        for (const stream of unread) stream.socket.destroy();
      },
    );
  }

  // The drain runs in a close hook, which Fastify's plugin loader gives 10 s by default: a drain
  // allowed longer must end by its own deadline, with its own verdict. No database in it.
  itOnce(
    'SIGTERM: a request still in flight at a ROWI_SHUTDOWN_TIMEOUT above 10 s is cut at that time-out (exit code 1, "were cut"), not by a plugin time-out',
    { timeout: 60_000 },
    async () => {
      const server = await servers.serve({
        env: { ROWI_SHUTDOWN_TIMEOUT: '11000', ROWI_REQUEST_TIMEOUT: '120000', ROWI_HANDLER_TIMEOUT: '120000' },
      });
      const { port } = new URL(server.baseUrl);
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => undefined);
      // A body that never finishes arriving: the request stays in flight.
      socket.write(
        `POST /v1/users HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${server.adminKey}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"name":`,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      const code = await server.stop('SIGTERM');
      expect(code).toBe(1);
      expect(server.stdout()).toMatch(/connections were still busy when the shutdown time-out ran out/);
      expect(server.stdout()).not.toMatch(/did not start in time|AVV_ERR/);
      socket.destroy();
    },
  );
});
