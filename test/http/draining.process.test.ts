import { afterEach, describe, expect, it } from 'vitest';
import type { Order } from '../../src/resources/orders/orders.schema.js';
import type { Stock } from '../../src/resources/items/stock.schema.js';
import { serverPool, type RunningServer } from '../helpers/process.js';

/**
 * Graceful drain under load, against the built CLI over real sockets (`npm test` builds first):
 * SIGTERM in the middle of a stream of orders. Requests in flight finish, requests that arrive on
 * open connections afterwards are served with Connection: close, new connections are refused, the
 * audit trail is flushed, the process exits 0, and a restart on the same database finds every
 * order answered 201, whole, and no other. (Keep-alive clients: draining-keepalive.process.test.ts.)
 */

interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

interface Outcome {
  requestId: string;
  /** 0: no answer (the connection was refused). */
  status: number;
  /** Why there was no answer: the code under fetch's error. */
  failure?: string;
  /** performance.now() when the request was sent. */
  sentAt: number;
  connection: string | null;
  retryAfter: string | null;
  body: unknown;
}

const WRITERS = 6;
const MAX_REQUESTS = 2000;
const SIGNAL_AFTER = 60;
const STOCK = 100_000;
const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

/** Servers a test started itself; one still running after the test (it failed before stopping it) is killed. */
const { serve, killAll } = serverPool();
afterEach(killAll);

/** JSON over fetch as the server's admin; paths are relative to /v1. */
async function json<T>(
  server: RunningServer,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const reply = await fetch(`${server.baseUrl}/v1${path}`, {
    method,
    headers: { 'x-api-key': server.adminKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await reply.text();
  return { status: reply.status, body: (text === '' ? undefined : JSON.parse(text)) as T };
}

async function readAll<T>(server: RunningServer, path: string): Promise<T[]> {
  const rows: T[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const reply: { status: number; body: Page<T> } = await json<Page<T>>(
      server,
      'GET',
      cursor === null ? path : `${path}&cursor=${encodeURIComponent(cursor)}`,
    );
    expect(reply.status, `GET ${path}`).toBe(200);
    rows.push(...reply.body.data);
    cursor = reply.body.next_cursor;
    if (cursor === null) return rows;
  }
  throw new Error(`GET ${path}: still a next_cursor after 100 pages`);
}

describe('rowi serve, draining under load', () => {
  it(
    'POST /v1/orders: on SIGTERM during a stream of orders, every 201 is stored whole, every request after the drain began is answered with Connection: close or refused at connect, every answer is in the audit trail, exit code 0',
    { timeout: 60_000 },
    async () => {
      // Rate limits off, load shedding off: this test is about the drain, and a 429 or an
      // overload 503 would blur which refusals came from it.
      const env = { ROWI_RATE_LIMIT_ADMIN: '0', ROWI_RATE_LIMIT_ORDERS_CREATE: '0', ROWI_MAX_EVENT_LOOP_DELAY: '0' };
      const first = await serve({ env });
      const user = await json<{ id: number }>(first, 'POST', '/users', {
        name: 'Buyer',
        email: 'drain.buyer@example.com',
      });
      expect(user.status).toBe(201);
      const itemIds: number[] = [];
      for (let index = 0; index < 4; index++) {
        const item = await json<{ id: number }>(first, 'POST', '/items', {
          name: `Drain ${index}`,
          sku: `DRAIN-${index}`,
          price: '1.00',
        });
        expect(item.status).toBe(201);
        expect((await json(first, 'PUT', `/items/${item.body.id}/stock`, { quantity: STOCK })).status).toBe(200);
        itemIds.push(item.body.id);
      }

      const outcomes: Outcome[] = [];
      let sent = 0;
      let signalledAt = Infinity;
      let drainingSeenAt = Infinity;
      const deadline = performance.now() + 20_000;
      // WRITERS writers post one order after another, at most MAX_REQUESTS in all and for 20 s,
      // until the server is gone.
      const writer = async () => {
        while (sent < MAX_REQUESTS && performance.now() < deadline) {
          const index = sent++;
          const requestId = `drain-${index}`;
          const lines = [{ item_id: itemIds[index % itemIds.length]!, quantity: 1 + (index % 3) }];
          const sentAt = performance.now();
          try {
            const reply = await fetch(`${first.baseUrl}/v1/orders`, {
              method: 'POST',
              headers: { 'x-api-key': first.adminKey, 'content-type': 'application/json', 'x-request-id': requestId },
              body: JSON.stringify({ name: `SO-${index}`, user_id: user.body.id, lines }),
            });
            const text = await reply.text();
            expect(reply.headers.get('x-request-id')).toBe(requestId);
            outcomes.push({
              requestId,
              status: reply.status,
              sentAt,
              connection: reply.headers.get('connection'),
              retryAfter: reply.headers.get('retry-after'),
              body: JSON.parse(text),
            });
          } catch (error) {
            const failure = (error as { cause?: { code?: string } }).cause?.code ?? String(error);
            outcomes.push({
              requestId,
              status: 0,
              failure,
              sentAt,
              connection: null,
              retryAfter: null,
              body: undefined,
            });
            return;
          }
          if (signalledAt === Infinity && outcomes.filter((outcome) => outcome.status === 201).length >= SIGNAL_AFTER) {
            signalledAt = performance.now();
            first.child.kill('SIGTERM');
          }
        }
      };
      // The moment rowi says its drain began (the log line is written once every answer says
      // Connection: close, and arrives here after).
      const watcher = (async () => {
        while (first.child.exitCode === null && performance.now() < deadline + 15_000) {
          if (drainingSeenAt === Infinity && first.stdout().includes('"msg":"draining:'))
            drainingSeenAt = performance.now();
          await pause(5);
        }
      })();
      let exitedAt = Infinity;
      void first.exited.then(() => (exitedAt = performance.now()));
      await Promise.all(Array.from({ length: WRITERS }, writer));
      const code = await first.exited;
      await watcher;

      expect(signalledAt).toBeLessThan(Infinity);
      expect(code).toBe(0);
      expect(first.stdout()).toContain('"msg":"stopped"');
      expect(drainingSeenAt).toBeLessThan(Infinity);
      // In-flight requests finished within the shutdown time-out (ROWI_SHUTDOWN_TIMEOUT, 10 s): exit code 0 says so too.
      expect(exitedAt - signalledAt).toBeLessThan(10_000);

      // Each request was answered whole (201), or found nobody listening. The one reset allowed is
      // the kernel's: a connection it had queued but rowi had not yet taken when the port closed
      // (as with any server that closes its port); its request never reached rowi, so rowi's log
      // has no line of it (nor its audit trail, checked below).
      expect(outcomes.filter((outcome) => ![201, 0].includes(outcome.status))).toEqual([]);
      const refused = outcomes.filter((outcome) => outcome.status === 0);
      const resetByKernel = refused.filter((outcome) => outcome.failure === 'ECONNRESET');
      expect(
        refused.filter((outcome) => outcome.failure !== 'ECONNREFUSED' && outcome.failure !== 'ECONNRESET'),
      ).toEqual([]);
      const logged = (outcome: Outcome) => first.stdout().includes(`"reqId":"${outcome.requestId}"`);
      expect(outcomes.filter((outcome) => outcome.status === 201 && !logged(outcome))).toEqual([]);
      expect(resetByKernel.filter(logged)).toEqual([]);
      const late = outcomes.filter((outcome) => outcome.sentAt > drainingSeenAt && outcome.status !== 0);
      expect(late.filter((outcome) => outcome.connection !== 'close')).toEqual([]);
      expect(outcomes.filter((outcome) => outcome.sentAt > signalledAt).length).toBeGreaterThan(0);
      const acknowledged = outcomes.filter((outcome) => outcome.status === 201).map((outcome) => outcome.body as Order);
      expect(acknowledged.length).toBeGreaterThanOrEqual(SIGNAL_AFTER);

      // A restart on the same database: exactly the orders answered 201, as they were answered.
      const second = await serve({ database: first.database, adminKey: first.adminKey, env });
      for (const order of acknowledged) {
        const read = await json<Order>(second, 'GET', `/orders/${order.id}`);
        expect({ status: read.status, body: read.body }, `order ${order.id} was answered 201`).toEqual({
          status: 200,
          body: order,
        });
      }
      const stored = await readAll<Order>(second, '/orders?limit=500');
      expect(stored.map((order) => order.id).sort((a, b) => a - b)).toEqual(
        acknowledged.map((order) => order.id).sort((a, b) => a - b),
      );
      // No write half-done: the stock reserved is exactly what the stored orders hold.
      for (const itemId of itemIds) {
        const stock = await json<Stock>(second, 'GET', `/items/${itemId}/stock`);
        const held = stored
          .flatMap((order) => order.lines)
          .filter((line) => line.item_id === itemId)
          .reduce((sum, line) => sum + line.quantity, 0);
        expect({
          item: itemId,
          onHand: stock.body.quantity + stock.body.reserved,
          reserved: stock.body.reserved,
        }).toEqual({ item: itemId, onHand: STOCK, reserved: held });
      }

      // The audit trail, flushed at shutdown, has every answered request with its status.
      const events = await readAll<{ request_id: string; status: number }>(
        second,
        '/audit-events?resource=orders&action=create&limit=500',
      );
      const audited = new Map(events.map((event) => [event.request_id, event.status]));
      expect(resetByKernel.filter((outcome) => audited.has(outcome.requestId))).toEqual([]);
      const answered = outcomes.filter((outcome) => outcome.status !== 0);
      expect(
        answered
          .filter((outcome) => audited.get(outcome.requestId) !== outcome.status)
          .map((outcome) => outcome.requestId),
      ).toEqual([]);
      console.log(
        `drain: ${outcomes.length} requests, ${acknowledged.length} × 201, ${refused.length} refused at connect (${resetByKernel.length} of them reset from the kernel's queue)`,
      );
      expect(await second.stop()).toBe(0);
    },
  );
});
