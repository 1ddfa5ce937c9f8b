import { request } from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { BACKEND } from '../helpers/database.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { SseClient } from '../helpers/sse.js';

/**
 * An open event stream against its caller's access as it changes (docs/events.md): the paths
 * beside the credential-change matrix (test/auth/credential-changes.test.ts): resuming after a
 * narrowing, HEAD, a change no signal announces, access widened, and an event committed before a
 * narrowing but not yet sent.
 */
let test: TestApp;
let base: string;
let userId: number;
let itemId: number;

beforeAll(async () => {
  test = await startApp();
  base = await test.app.listen({ host: '127.0.0.1', port: 0 });
  userId = (await createUser(test)).user.id;
  itemId = (await createItem(test)).item.id;
  await setStock(test, itemId, 1_000_000);
});
afterAll(() => test.close());

const MERGE_PATCH = { 'content-type': 'application/merge-patch+json' };
const open = (key: string, headers: Record<string, string> = {}) =>
  SseClient.open(`${base}/v1/events/stream`, { 'x-api-key': key, ...headers });
const narrow = (callerId: number, removed: string[]) =>
  test.call({
    method: 'PATCH',
    url: `/v1/callers/${callerId}`,
    headers: MERGE_PATCH,
    body: JSON.stringify({ removed_scopes: removed }),
  });

async function placeOrder(): Promise<{ id: number }> {
  const reply = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'Stream access', user_id: userId, lines: [{ item_id: itemId, quantity: 1 }] },
  });
  expect(reply.status).toBe(201);
  return reply.json;
}

/** The raw bytes of a stream until the server closes it (or `ms` pass). */
function rawStream(key: string, ms: number): { text: Promise<string> } {
  let text = '';
  return {
    text: new Promise((resolve) => {
      const outgoing = request(`${base}/v1/events/stream`, { headers: { 'x-api-key': key } }, (response) => {
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
      });
      const timer = setTimeout(() => outgoing.destroy(), ms);
      outgoing.on('socket', (socket) => socket.once('close', () => (clearTimeout(timer), resolve(text))));
      outgoing.on('error', () => undefined);
      outgoing.end();
    }),
  };
}

describe('GET /v1/events/stream, as access changes', () => {
  it("GET /v1/events/stream: a last event named stream.ended, without an id (Last-Event-ID stays the last event's), carrying the 401 problem, then the connection closes, when its key is revoked", async () => {
    const { caller, key, keyId } = await createCallerWithKey(test, { role: 'reader' });
    const stream = rawStream(key, 5000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const { user } = await createUser(test);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` })).status).toBe(204);
    const text = await stream.text;
    const blocks = text.split('\n\n').filter((block) => block !== '');
    expect(blocks.at(-2)).toMatch(new RegExp(`^id: evt_\\w+\\nevent: user.created\\ndata: .*"id":${user.id}`));
    const last = blocks.at(-1)!.split('\n');
    expect(last.map((line) => line.slice(0, line.indexOf(':')))).toEqual(['event', 'data']);
    expect(last[0]).toBe('event: stream.ended');
    expect(JSON.parse(last[1]!.slice('data: '.length))).toMatchObject({
      type: '/problems/invalid-credentials',
      title: 'Invalid credentials',
      status: 401,
      detail: 'The API key has been revoked.',
      instance: '/v1/events/stream',
    });
  });

  it('GET /v1/events/stream with Last-Event-ID: the replay leaves out events of what the caller may no longer read; 410 for a Last-Event-ID of such an event, when orders:read was removed', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'reader' });
    const { user: first } = await createUser(test);
    const [firstEvent] = (await test.call({ url: '/v1/events?type=user.created&limit=1' })).json.data;
    expect(firstEvent.data.id).toBe(first.id);
    const order = await placeOrder();
    const orderEvent = (await test.call({ url: '/v1/events?type=order.created&limit=1' })).json.data[0];
    expect(orderEvent.data.id).toBe(order.id);
    const { user: second } = await createUser(test);
    expect((await narrow(caller.id, ['orders:read'])).status).toBe(200);

    const resumed = await open(key, { 'last-event-id': firstEvent.id });
    expect(resumed.response.statusCode).toBe(200);
    expect(await resumed.waitUntil((event) => event.event === 'user.created' && event.data.data.id === second.id)).toBe(
      true,
    );
    expect(resumed.events.filter((event) => event.data.path.startsWith('/v1/orders'))).toEqual([]);
    resumed.close();
    const refused = await open(key, { 'last-event-id': orderEvent.id });
    expect(refused.response.statusCode).toBe(410);
    expect(JSON.parse(await refused.text())).toMatchObject({ type: '/problems/last-event-unknown' });
  });

  it('HEAD /v1/events/stream: 401 once the key is revoked, as GET', async () => {
    const { caller, key, keyId } = await createCallerWithKey(test, { role: 'reader' });
    expect((await test.call({ method: 'HEAD', url: '/v1/events/stream', key })).status).toBe(200);
    expect((await test.call({ method: 'DELETE', url: `/v1/callers/${caller.id}/keys/${keyId}` })).status).toBe(204);
    expect((await test.call({ method: 'HEAD', url: '/v1/events/stream', key })).status).toBe(401);
    expect((await test.call({ url: '/v1/events/stream', key })).status).toBe(401);
  });

  it('GET /v1/events/stream: ends (401) within 1 s when its key is revoked in the database, with no signal of the change', async () => {
    const { key, keyId } = await createCallerWithKey(test, { role: 'reader' });
    const stream = await open(key);
    await createUser(test);
    await stream.waitFor(1);
    await test.storage.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date().toISOString() })
      .where('id', '=', keyId)
      .execute();
    const revokedAt = Date.now();
    expect(await stream.waitForClose(3000)).toBe(true);
    expect(Date.now() - revokedAt).toBeLessThanOrEqual(1000);
    expect(stream.endedWith).toMatchObject({ status: 401, type: '/problems/invalid-credentials' });
  });

  it('GET /v1/events/stream: an open stream does not widen when orders:read is given back (a new one does)', async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['orders:read'] });
    const narrowed = await open(key);
    expect((await narrow(caller.id, [])).status).toBe(200);
    const widened = await open(key);
    const order = await placeOrder();
    const { user } = await createUser(test);
    for (const stream of [narrowed, widened])
      expect(await stream.waitUntil((event) => event.event === 'user.created' && event.data.data.id === user.id)).toBe(
        true,
      );
    expect(narrowed.events.some((event) => event.event === 'order.created')).toBe(false);
    expect(
      widened.events.filter((event) => event.event === 'order.created').map((event) => event.data.data.id),
    ).toEqual([order.id]);
    for (const stream of [narrowed, widened]) stream.close();
  });

  // Only PostgreSQL holds an event back: it waits for older transactions that may still write
  // events, so one committed before the narrowing can still be unsent when the narrowing commits.
  it.skipIf(BACKEND !== 'postgres')(
    'GET /v1/events/stream: an order event committed before orders:read was removed, but held back until after, is not sent',
    async () => {
      const { caller, key } = await createCallerWithKey(test, { role: 'reader' });
      const stream = await open(key);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      // An older transaction with a transaction id, open across the order and the narrowing.
      const older = test.storage.db.transaction().execute(async (trx) => {
        await sql`select pg_current_xact_id()`.execute(trx);
        holding();
        await released;
      });
      await held;
      const order = await placeOrder();
      expect((await test.call({ url: `/v1/orders/${order.id}` })).status).toBe(200);
      expect((await narrow(caller.id, ['orders:read'])).status).toBe(200);
      release();
      await older;
      const { user } = await createUser(test);
      expect(await stream.waitUntil((event) => event.event === 'user.created' && event.data.data.id === user.id)).toBe(
        true,
      );
      expect(stream.events.filter((event) => event.event === 'order.created')).toEqual([]);
      stream.close();
    },
  );
});
