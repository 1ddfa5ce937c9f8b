import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { buildObservation } from '../helpers/weather.js';

/** Only the fields asked for (docs/reading.md): `fields=` on every read and list, in every representation. */
let test: TestApp;
let order: { id: number; user_id: number; lines: { item_id: number; quantity: number }[] };
let userId: number;
let itemIds: number[];

beforeAll(async () => {
  test = await startApp();
  const { user } = await createUser(test);
  userId = user.id;
  itemIds = [];
  for (const price of ['1.25', '2.50']) {
    const { item } = await createItem(test, { price });
    await setStock(test, item.id, 10);
    itemIds.push(item.id);
  }
  const placed = await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: {
      name: 'fields',
      user_id: userId,
      lines: [
        { item_id: itemIds[0], quantity: 2 },
        { item_id: itemIds[1], quantity: 1 },
      ],
    },
  });
  expect(placed.status).toBe(201);
  order = placed.json;
});
afterAll(() => test.close());

const csv = { accept: 'text/csv' };
const ndjson = { accept: 'application/x-ndjson' };
const xml = { accept: 'application/xml' };

describe('GET /v1/orders?fields=', () => {
  it('GET /v1/orders/{id}: only the fields named, id always, dotted names inside the lines, in JSON and XML', async () => {
    const reply = await test.call({ url: `/v1/orders/${order.id}?fields=name,lines.quantity` });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual({ id: order.id, name: 'fields', lines: [{ quantity: 2 }, { quantity: 1 }] });
    const whole = await test.call({ url: `/v1/orders/${order.id}?fields=lines,status` });
    expect(whole.json).toEqual({ id: order.id, status: 'placed', lines: (order as { lines: unknown }).lines });
    const asXml = await test.call({ url: `/v1/orders/${order.id}?fields=name,lines.quantity`, headers: xml });
    expect(asXml.status).toBe(200);
    expect(asXml.text).toContain(
      `<order><id>${order.id}</id><name>fields</name><lines><line><quantity>2</quantity></line><line><quantity>1</quantity></line></lines></order>`,
    );
  });

  it('GET /v1/orders: the page envelope stays, each record has the fields, and Link keeps them', async () => {
    const reply = await test.call({ url: `/v1/orders?fields=total&user_id=${userId}` });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ data: [{ id: order.id, total: '5.00' }], next_cursor: null });
    const { item } = await createItem(test);
    const paged = await test.call({ url: `/v1/items?fields=name&limit=1` });
    expect(Object.keys(paged.json.data[0])).toEqual(['id', 'name']);
    expect(paged.headers.link).toContain('fields=name');
    const next = await test.call({ url: /<([^>]+)>/.exec(String(paged.headers.link))![1]! });
    expect(Object.keys(next.json.data[0])).toEqual(['id', 'name']);
    expect(next.json.data.map((record: { id: number }) => record.id)).not.toContain(paged.json.data[0].id);
    expect(item.id).toBeGreaterThan(0);
  });

  it('GET /v1/orders as CSV and NDJSON: the columns and members of the fields only', async () => {
    const asCsv = await test.call({ url: `/v1/orders?fields=lines.quantity,name&user_id=${userId}`, headers: csv });
    expect(asCsv.status).toBe(200);
    expect(asCsv.text).toBe(`id,name,lines.quantity\r\n${order.id},fields,2\r\n${order.id},fields,1\r\n`);
    // Without a field of the lines, an order is one row.
    const flat = await test.call({ url: `/v1/orders?fields=total&user_id=${userId}`, headers: csv });
    expect(flat.text).toBe(`id,total\r\n${order.id},5.00\r\n`);
    const lines = await test.call({ url: `/v1/orders?fields=lines.item_id&user_id=${userId}`, headers: ndjson });
    expect(lines.text).toBe(
      `${JSON.stringify({ id: order.id, lines: order.lines.map(({ item_id }) => ({ item_id })) })}\n`,
    );
  });
});

describe('fields and ETags', () => {
  it('GET /v1/orders/{id}: the ETag names the field set, so If-None-Match with another set never gets a 304', async () => {
    const url = `/v1/orders/${order.id}`;
    const full = String((await test.call({ url })).headers.etag);
    const some = String((await test.call({ url: `${url}?fields=name` })).headers.etag);
    const other = String((await test.call({ url: `${url}?fields=total` })).headers.etag);
    const someXml = String((await test.call({ url: `${url}?fields=name`, headers: xml })).headers.etag);
    expect(new Set([full, some, other, someXml]).size).toBe(4);
    expect((await test.call({ url: `${url}?fields=name`, headers: { 'if-none-match': full } })).status).toBe(200);
    expect((await test.call({ url, headers: { 'if-none-match': some } })).status).toBe(200);
    expect((await test.call({ url: `${url}?fields=total`, headers: { 'if-none-match': some } })).status).toBe(200);
    const current = await test.call({ url: `${url}?fields=name`, headers: { 'if-none-match': some } });
    expect(current.status).toBe(304);
    expect(current.text).toBe('');
    // The same set, however written (order, repetition, the id named or not), is one representation.
    for (const same of ['name,name', 'id,name', 'name,id'])
      expect(String((await test.call({ url: `${url}?fields=${same}` })).headers.etag)).toBe(some);
  });

  it('PATCH /v1/users/{id}: If-Match with the ETag of some fields of the current version is current; of an old one, 412', async () => {
    const { user } = await createUser(test);
    const tag = String((await test.call({ url: `/v1/users/${user.id}?fields=email` })).headers.etag);
    const changed = await test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': tag, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ name: 'Changed' }),
    });
    expect(changed.status).toBe(200);
    const stale = await test.call({
      method: 'PATCH',
      url: `/v1/users/${user.id}`,
      headers: { 'if-match': tag, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ name: 'Again' }),
    });
    expectProblem(stale, 412, 'precondition-failed');
  });
});

describe('fields on every collection', () => {
  it('every list and read answers only the fields named and its identifier', async () => {
    const events = await test.call({ url: '/v1/events?limit=1' });
    const { caller, keyId } = await createCallerWithKey(test, { role: 'reader' });
    const observed = await test.call({ method: 'PUT', url: '/v1/weather/fields-place', body: buildObservation() });
    expect(observed.status).toBe(201);
    const cases: [string, string[]][] = [
      [`/v1/users?fields=email`, ['id', 'email']],
      [`/v1/users/${userId}?fields=email`, ['id', 'email']],
      [`/v1/items?fields=price`, ['id', 'price']],
      [`/v1/items/${itemIds[0]}?fields=price`, ['id', 'price']],
      [`/v1/items/stock?fields=quantity`, ['item_id', 'quantity']],
      [`/v1/items/${itemIds[0]}/stock?fields=reserved`, ['item_id', 'reserved']],
      [`/v1/items/${itemIds[0]}/stock/movements?fields=kind`, ['id', 'kind']],
      [`/v1/events?fields=type`, ['id', 'type']],
      [`/v1/events/${events.json.data[0].id}?fields=type`, ['id', 'type']],
      [`/v1/audit-events?fields=status`, ['id', 'status']],
      [`/v1/callers?fields=role`, ['id', 'role']],
      [`/v1/callers/${caller.id}?fields=role`, ['id', 'role']],
      [`/v1/callers/${caller.id}/keys?fields=prefix`, ['id', 'prefix']],
      [`/v1/callers/${caller.id}/keys/${keyId}?fields=prefix`, ['id', 'prefix']],
      [`/v1/weather?fields=temperature_c`, ['id', 'temperature_c']],
      [`/v1/weather/fields-place?fields=temperature_c`, ['id', 'temperature_c']],
      [`/v1/weather/fields-place/observations?fields=source`, ['id', 'source']],
      [`/v1/webhook-endpoints?fields=url`, ['id', 'url']],
      [`/v1/operations?fields=status`, ['id', 'status']],
    ];
    // The audit trail is written in batches: wait for a record of it.
    await expect
      .poll(async () => (await test.call({ url: '/v1/audit-events?limit=1' })).json.data.length, { timeout: 5000 })
      .toBe(1);
    for (const [url, keys] of cases) {
      const reply = await test.call({ url });
      expect(reply.status, url).toBe(200);
      const records = Array.isArray(reply.json.data) ? reply.json.data : [reply.json];
      for (const record of records) expect(Object.keys(record).sort(), url).toEqual([...keys].sort());
      expectProblem(await test.call({ url: `${url}x` }), 400, 'invalid-query');
    }
  });

  it('GET /v1/users/{id}?fields=: a record the caller may not see is 404 whatever the fields', async () => {
    const { user } = await createUser(test);
    const created = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'fields-own', role: 'reader', record_access: { users: 'own', items: 'own', orders: 'own' } },
    });
    const own = (await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} })).json.key;
    expectProblem(await test.call({ url: `/v1/users/${user.id}?fields=email`, key: own }), 404, 'not-found');
    const listed = await test.call({ url: `/v1/users?fields=email`, key: own });
    expect(listed.json.data).toEqual([]);
  });
});

describe('bad fields', () => {
  const refused = async (fields: string, says: string) => {
    const problem = expectProblem(await test.call({ url: `/v1/orders?fields=${fields}` }), 400, 'invalid-query');
    expect(problem.errors?.[0]?.pointer).toBe('#/fields');
    expect(problem.detail).toContain(says);
  };

  it('GET /v1/orders?fields=: 400 naming an unknown field, an empty name, a dotted name that does not exist', async () => {
    await refused('id,nope', '"nope", which is not a field; the fields are id, name');
    await refused('lines.nope', 'lines has no field "nope"; its fields are item_id, quantity');
    await refused('name.first', 'name has no fields inside it');
    await refused('id,,name', 'empty name (name 2)');
    await refused('lines.', 'empty name between its dots');
    await refused('', 'must not be empty');
    await refused('__proto__', '"__proto__", which is not a field');
  });

  it('GET /v1/orders?fields=: 400 for more than 100 names or 2,000 characters, saying the cap', async () => {
    await refused(Array.from({ length: 101 }, () => 'id').join(','), 'at most 100');
    await refused(Array.from({ length: 10_000 }, (_, n) => `f${n}`).join(','), 'at most 2000 characters');
    expect((await test.call({ url: `/v1/orders?fields=${Array(100).fill('name').join(',')}` })).status).toBe(200);
    const repeated = await test.call({ url: '/v1/orders?fields=id&fields=name' });
    expectProblem(repeated, 400, 'invalid-query');
  });
});
