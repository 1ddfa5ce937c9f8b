import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

/** Every event the admin sees after `afterId` (exclusive), oldest first. */
async function eventsSince(afterId: string | undefined, key?: string) {
  const reply = await test.call({ url: '/v1/events?limit=500', ...(key ? { key } : {}) });
  expect(reply.status).toBe(200);
  const events = (
    reply.json.data as { id: string; type: string; path: string; data: Record<string, unknown> }[]
  ).reverse();
  return afterId === undefined ? events : events.filter((event) => event.id > afterId);
}

async function lastEventId(): Promise<string | undefined> {
  const reply = await test.call({ url: '/v1/events?limit=1' });
  return reply.json.data[0]?.id;
}

describe('the outbox', () => {
  it("an event's data is the resource as GET answers it: the same members, nothing internal (no version)", async () => {
    const before = await lastEventId();
    const { user } = await createUser(test);
    const { item } = await createItem(test, { price: '3.00' });
    await setStock(test, item.id, 5);
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Shape', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    const caller = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: `shape-${user.id}`, role: 'reader' },
    });
    const events = await eventsSince(before);
    for (const [type, url] of [
      ['user.created', `/v1/users/${user.id}`],
      ['item.created', `/v1/items/${item.id}`],
      ['order.created', `/v1/orders/${placed.json.id}`],
      ['caller.created', `/v1/callers/${caller.json.id}`],
    ]) {
      const event = events.find((each) => each.type === type)!;
      const read = await test.call({ url: url! });
      expect(event.data, type).toEqual(read.json);
    }
  });

  it('GET /v1/events: lists the events of users, items, stock and orders, with the resource after each change, when they are made', async () => {
    const before = await lastEventId();
    const { user } = await createUser(test);
    const { item } = await createItem(test, { price: '3.00' });
    await setStock(test, item.id, 10);
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Order', user_id: user.id, lines: [{ item_id: item.id, quantity: 4 }] },
    });
    expect(placed.status).toBe(201);
    const fulfilled = await test.call({
      method: 'PATCH',
      url: `/v1/orders/${placed.json.id}`,
      body: { status: 'fulfilled' },
    });
    expect(fulfilled.status).toBe(200);

    const events = await eventsSince(before);
    expect(events.map((event) => event.type)).toEqual([
      'user.created',
      'item.created',
      'stock.changed',
      'order.created',
      'stock.changed',
      'order.status_changed',
      'stock.changed',
    ]);
    expect(events[0]).toMatchObject({ path: `/v1/users/${user.id}`, data: { id: user.id, email: user.email } });
    expect(events[2]).toMatchObject({
      path: `/v1/items/${item.id}/stock`,
      data: {
        item_id: item.id,
        quantity: 10,
        reserved: 0,
        movement: { kind: 'set', quantity_change: 10, order_id: null },
      },
    });
    expect(events[3]).toMatchObject({
      path: `/v1/orders/${placed.json.id}`,
      data: { id: placed.json.id, status: 'placed', total: '12.00', lines: [{ item_id: item.id, quantity: 4 }] },
    });
    expect(events[4]).toMatchObject({
      data: {
        quantity: 6,
        reserved: 4,
        movement: { kind: 'reserve', quantity_change: -4, reserved_change: 4, order_id: placed.json.id },
      },
    });
    expect(events[5]).toMatchObject({ data: { status: 'fulfilled', previous_status: 'placed' } });
    expect(events[6]).toMatchObject({ data: { quantity: 6, reserved: 0, movement: { kind: 'fulfil' } } });
    for (const event of events) expect(event.id).toMatch(/^evt_[0-9a-f]{28}$/);
  });

  it('POST /v1/orders: writes no event when the order is refused (409, rolled back)', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    const before = await lastEventId();
    const refused = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Too much', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    expect(refused.status).toBe(409);
    expect(await eventsSince(before)).toEqual([]);
  });

  it('PATCH /v1/users/{id}: writes no event when nothing changes, and user.updated when something does', async () => {
    const { user } = await createUser(test);
    const before = await lastEventId();
    expect((await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: user.name } })).status).toBe(
      200,
    );
    expect(await eventsSince(before)).toEqual([]);
    expect((await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Renamed' } })).status).toBe(
      200,
    );
    const events = await eventsSince(before);
    expect(events.map((event) => [event.type, event.data.name])).toEqual([['user.updated', 'Renamed']]);
  });

  it('DELETE /v1/users/{id}: user.deleted carries the id only', async () => {
    const { user } = await createUser(test);
    const before = await lastEventId();
    expect((await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` })).status).toBe(204);
    expect(await eventsSince(before)).toMatchObject([
      { type: 'user.deleted', path: `/v1/users/${user.id}`, data: { id: user.id } },
    ]);
  });

  it('PUT /v1/weather/{place}: weather.observed carries the place and the observation', async () => {
    const before = await lastEventId();
    const observed = await test.call({
      method: 'PUT',
      url: '/v1/weather/Outbox-Town',
      body: {
        temperature_c: 12.5,
        humidity_pct: 70,
        wind_kph: 8,
        conditions: 'overcast',
        observed_at: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    expect(observed.status).toBe(201);
    const [event] = await eventsSince(before);
    expect(event).toMatchObject({
      type: 'weather.observed',
      path: '/v1/weather/outbox-town',
      data: { place: 'outbox-town', temperature_c: 12.5, observation: { conditions: 'overcast' } },
    });
  });

  it('POST /v1/callers/{id}/keys: api_key.created never carries the key', async () => {
    const before = await lastEventId();
    const { caller } = await createCallerWithKey(test, { role: 'reader' });
    const made = await test.call({ method: 'POST', url: `/v1/callers/${caller.id}/keys`, body: {} });
    expect(made.status).toBe(201);
    const events = await eventsSince(before);
    expect(events.map((event) => event.type)).toEqual(['caller.created', 'api_key.created', 'api_key.created']);
    expect(JSON.stringify(events)).not.toContain(made.json.key);
  });
});

describe('GET /v1/events', () => {
  it('GET /v1/events: a reader without orders:read sees no order or stock events, and 404 for one by id', async () => {
    const { user } = await createUser(test);
    const { item } = await createItem(test);
    await setStock(test, item.id, 5);
    await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Hidden', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
    });
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['orders:read', 'stock:read'] });
    const seen = await eventsSince(undefined, key);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((event) => /^(order|stock)\./.test(event.type))).toEqual([]);
    const [orderEvent] = (await test.call({ url: '/v1/events?type=order.created&limit=1' })).json.data;
    const hidden = await test.call({ url: `/v1/events/${orderEvent.id}`, key });
    expect(hidden.status).toBe(404);
    expect(hidden.json.type).toMatch(/not-found$/);
    expect((await test.call({ url: `/v1/events/${orderEvent.id}` })).json).toMatchObject({
      id: orderEvent.id,
      type: 'order.created',
    });
  });

  it('GET /v1/events?type=: only that type; 400 for a type that does not exist', async () => {
    const page = await test.call({ url: '/v1/events?type=user.created' });
    expect(page.status).toBe(200);
    expect(new Set(page.json.data.map((event: { type: string }) => event.type))).toEqual(new Set(['user.created']));
    const bad = await test.call({ url: '/v1/events?type=user.exploded' });
    expect(bad.status).toBe(400);
    expect(bad.json.type).toMatch(/invalid-query$/);
  });

  it('GET /v1/events?created_after=: only events after the instant, newest first, paged with a Link', async () => {
    const since = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (let index = 0; index < 3; index++) await createUser(test);
    const first = await test.call({ url: `/v1/events?created_after=${encodeURIComponent(since)}&limit=2` });
    expect(first.json.data).toHaveLength(2);
    expect(first.json.data[0].id > first.json.data[1].id).toBe(true);
    expect(String(first.headers.link)).toContain('rel="next"');
    const second = await test.call({
      url: `/v1/events?created_after=${encodeURIComponent(since)}&limit=2&cursor=${first.json.next_cursor}`,
    });
    expect(second.json.data).toHaveLength(1);
  });

  it('GET /v1/events/{id}: 404 for a malformed or unknown id, 304 for a current copy', async () => {
    expect((await test.call({ url: '/v1/events/nope' })).status).toBe(404);
    expect((await test.call({ url: `/v1/events/evt_${'0'.repeat(28)}` })).status).toBe(404);
    const id = await lastEventId();
    const read = await test.call({ url: `/v1/events/${id}` });
    expect(read.headers.etag).toBe(`"${id}"`);
    expect((await test.call({ url: `/v1/events/${id}`, headers: { 'if-none-match': `"${id}"` } })).status).toBe(304);
  });

  it('GET /v1/events: 406 for Accept: application/xml (events are JSON only)', async () => {
    const reply = await test.call({ url: '/v1/events', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(406);
  });
});

describe.skipIf(process.env.ROWI_TEST_BACKEND !== 'postgres')('reading the outbox on PostgreSQL', () => {
  it('findEventsAfter: an event committed while an older transaction that writes events is still open waits for it, then both come in transaction order', async () => {
    const { findEventsAfter, latestPosition } = await import('../../src/outbox/outbox.repository.js');
    const { recordEvent } = await import('../../src/outbox/outbox.js');
    const { unitOfWork } = await import('../../src/db/unit-of-work.js');
    const start = await latestPosition(test.storage.db);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let began!: () => void;
    const begun = new Promise<void>((resolve) => (began = resolve));
    // The older transaction: it has a transaction id (it wrote) before the newer one commits its event.
    const older = unitOfWork(test.storage.db, async (trx) => {
      await trx
        .insertInto('users')
        .values({
          name: 'Older',
          email: `older.${process.pid}@example.com`,
          email_key: `older.${process.pid}@example.com`,
          version: 1,
          created_at: new Date().toISOString(),
          updated_at: new Date().toISOString(),
        })
        .execute();
      began();
      await held;
      await recordEvent(trx, 'user.created', '/v1/users/0', { name: 'Older' });
    });
    await begun;
    const { user } = await createUser(test);
    expect(await findEventsAfter(test.storage.db, start, { limit: 10 })).toEqual([]);
    release();
    await older;
    const events = await findEventsAfter(test.storage.db, start, { limit: 10 });
    expect(events.map((event) => JSON.parse(event.data).name)).toEqual(['Older', user.name]);
  });
});
