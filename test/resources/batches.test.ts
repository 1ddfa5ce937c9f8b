import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildItem, buildUser, createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';
import { storedInventory, storedUsers } from '../helpers/stored.js';

/** Atomic batches (docs/bulk.md "Batches"), on the run's database. */
let test: TestApp;
beforeAll(async () => {
  test = await startApp({ ROWI_BATCH_MAX: '20' });
});
afterAll(() => test.close());

const batch = (collection: string, body: unknown, headers: Record<string, string> = {}, key?: string) =>
  test.call({ method: 'POST', url: `/v1/${collection}/batch`, body, headers, ...(key ? { key } : {}) });

/** Everything a failed batch must leave as it was: records, ledger, events and the entries' audit records. */
async function storedEverything() {
  const db = test.storage.db;
  return {
    users: await storedUsers(test),
    inventory: await storedInventory(test),
    events: await db.selectFrom('events').select(['id', 'type']).orderBy('id').execute(),
    entryAudit: await db.selectFrom('audit_events').select(['request_id']).where('duration_ms', '=', 0).execute(),
  };
}

function auditOf(requestId: string) {
  return test.storage.db
    .selectFrom('audit_events')
    .select(['method', 'path', 'resource', 'record_id', 'action', 'status'])
    .where('request_id', '=', requestId)
    .where('duration_ms', '=', 0)
    .orderBy('id')
    .execute();
}

describe('POST /v1/users/batch', () => {
  it('POST /v1/users/batch: 200 with a result per entry in request order, each stored with its event and audit record, when every entry is valid', async () => {
    const kept = await createUser(test);
    const renamed = await createUser(test);
    const removed = await createUser(test);
    const first = buildUser();
    const second = buildUser();
    const lastEvent = (await storedEverything()).events.at(-1)!.id;

    const reply = await batch('users', {
      create: [first, second],
      replace: [{ id: kept.user.id, name: 'Kept', email: kept.user.email, if_match: kept.etag }],
      change: [{ id: renamed.user.id, name: 'Renamed' }],
      delete: [{ id: removed.user.id }],
    });

    expect(reply.status).toBe(200);
    const created = reply.json.create as { status: number; location: string; etag: string; record: { id: number } }[];
    expect(created.map((result) => [result.status, result.record])).toEqual([
      [201, expect.objectContaining({ name: first.name, email: first.email })],
      [201, expect.objectContaining({ name: second.name, email: second.email })],
    ]);
    expect(created[0]!.record.id).toBeLessThan(created[1]!.record.id);
    expect(created[0]!.location).toBe(`/v1/users/${created[0]!.record.id}`);
    expect(created[0]!.etag).toBe('"v1"');
    expect(reply.json.replace).toEqual([
      {
        status: 200,
        location: `/v1/users/${kept.user.id}`,
        etag: '"v2"',
        record: expect.objectContaining({ id: kept.user.id, name: 'Kept' }),
      },
    ]);
    expect(reply.json.change[0]).toMatchObject({ status: 200, etag: '"v2"', record: { name: 'Renamed' } });
    expect(reply.json.delete).toEqual([{ status: 204, location: `/v1/users/${removed.user.id}` }]);

    const read = await test.call({ url: created[1]!.location });
    expect(read.json).toEqual(created[1]!.record);
    expect((await test.call({ url: `/v1/users/${removed.user.id}` })).status).toBe(404);
    expect((await test.call({ url: `/v1/users/${renamed.user.id}` })).json.name).toBe('Renamed');
    const events = await test.storage.db
      .selectFrom('events')
      .select(['type', 'path'])
      .where('id', '>', lastEvent)
      .orderBy('id')
      .execute();
    expect(events).toEqual([
      { type: 'user.created', path: created[0]!.location },
      { type: 'user.created', path: created[1]!.location },
      { type: 'user.updated', path: `/v1/users/${kept.user.id}` },
      { type: 'user.updated', path: `/v1/users/${renamed.user.id}` },
      { type: 'user.deleted', path: `/v1/users/${removed.user.id}` },
    ]);
    expect(await auditOf(String(reply.headers['x-request-id']))).toEqual([
      {
        method: 'POST',
        path: created[0]!.location,
        resource: 'users',
        record_id: String(created[0]!.record.id),
        action: 'create',
        status: 201,
      },
      {
        method: 'POST',
        path: created[1]!.location,
        resource: 'users',
        record_id: String(created[1]!.record.id),
        action: 'create',
        status: 201,
      },
      {
        method: 'PUT',
        path: `/v1/users/${kept.user.id}`,
        resource: 'users',
        record_id: String(kept.user.id),
        action: 'update',
        status: 200,
      },
      {
        method: 'PATCH',
        path: `/v1/users/${renamed.user.id}`,
        resource: 'users',
        record_id: String(renamed.user.id),
        action: 'update',
        status: 200,
      },
      {
        method: 'DELETE',
        path: `/v1/users/${removed.user.id}`,
        resource: 'users',
        record_id: String(removed.user.id),
        action: 'delete',
        status: 204,
      },
    ]);
  });

  it('POST /v1/users/batch: 409 batch-entry-conflict naming #/create/2/email, and nothing stored, when the last entry takes an email in use', async () => {
    const existing = await createUser(test);
    const before = await storedEverything();

    const reply = await batch('users', {
      create: [buildUser(), buildUser(), buildUser({ email: existing.user.email.toUpperCase() })],
    });

    const problem = expectProblem(reply, 409, 'batch-entry-conflict');
    expect(problem.errors).toEqual([
      { in: 'body', pointer: '#/create/2/email', detail: expect.stringContaining('email') },
    ]);
    expect(problem.failed_entry).toMatchObject({ pointer: '#/create/2', type: '/problems/email-taken', status: 409 });
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/users/batch: 409 naming the entry whose if_match is stale, and nothing stored, when a record changed since it was read', async () => {
    const { user, etag } = await createUser(test);
    const other = await createUser(test);
    await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Changed meanwhile' } });
    const before = await storedEverything();

    const reply = await batch('users', {
      change: [
        { id: other.user.id, name: 'Would change', if_match: other.etag },
        { id: user.id, name: 'Too late', if_match: etag },
      ],
    });

    const problem = expectProblem(reply, 409, 'batch-entry-conflict');
    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/change/1']);
    expect(problem.failed_entry).toMatchObject({ type: '/problems/precondition-failed', status: 412 });
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/users/batch: 422 batch-entry-refused naming #/delete/0, and nothing stored, when an entry names no record', async () => {
    const before = await storedEverything();

    const reply = await batch('users', { create: [buildUser()], delete: [{ id: 999_999 }] });

    const problem = expectProblem(reply, 422, 'batch-entry-refused');
    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/delete/0']);
    expect(problem.failed_entry).toMatchObject({ type: '/problems/not-found', status: 404 });
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/users/batch: the first answer again with Idempotent-Replayed, and stored once, when the batch is repeated with its Idempotency-Key', async () => {
    const body = { create: [buildUser(), buildUser()] };
    const headers = { 'idempotency-key': `batch-${Date.now()}` };

    const first = await batch('users', body, headers);
    const again = await batch('users', body, headers);
    const other = await batch('users', { create: [buildUser()] }, headers);

    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json).toEqual(first.json);
    const emails = body.create.map((user) => user.email);
    const stored = (await storedUsers(test)).filter((user) => emails.includes(user.email));
    expect(stored).toHaveLength(2);
    expectProblem(other, 422, 'idempotency-key-reused');
  });

  it('POST /v1/users/batch: 422 batch-invalid naming each repeated entry, and nothing stored, when two entries name one user', async () => {
    const { user } = await createUser(test);
    const twice = buildUser();
    const before = await storedEverything();

    const reply = await batch('users', {
      create: [twice, { ...buildUser(), email: twice.email.toUpperCase() }],
      change: [{ id: user.id, name: 'A' }],
      delete: [{ id: user.id }],
    });

    const problem = expectProblem(reply, 422, 'batch-invalid');
    expect(problem.errors).toEqual([
      { in: 'body', pointer: '#/create/1', detail: expect.stringContaining('#/create/0') },
      { in: 'body', pointer: '#/delete/0', detail: expect.stringContaining('#/change/0') },
    ]);
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/users/batch: 422 batch-invalid pointing at the inner batch when an entry holds a batch', async () => {
    const reply = await batch('users', { create: [buildUser(), { create: [buildUser()] }] });

    const problem = expectProblem(reply, 422, 'batch-invalid');
    expect(problem.errors).toEqual([
      { in: 'body', pointer: '#/create/1/create', detail: expect.stringContaining('nest') },
    ]);
  });

  it('POST /v1/users/batch: 422 batch-invalid when the batch holds no entry', async () => {
    for (const body of [{}, { create: [], delete: [] }]) {
      const problem = expectProblem(await batch('users', body), 422, 'batch-invalid');
      expect(problem.detail).toContain('no entry');
    }
  });

  it('POST /v1/users/batch: 415 for an XML body and 406 when only XML is accepted, since batches are JSON only', async () => {
    const xml = await test.call({
      method: 'POST',
      url: '/v1/users/batch',
      headers: { 'content-type': 'application/xml' },
      body: '<batch><create><name>X</name><email>x@example.com</email></create></batch>',
    });
    const accept = await batch('users', { create: [buildUser()] }, { accept: 'application/xml' });

    expectProblem(xml, 415, 'unsupported-media-type');
    expect(accept.status).toBe(406);
  });

  it('POST /v1/users/batch: 422 validation-failed pointing into the entries when they have the wrong types', async () => {
    const before = await storedEverything();

    const reply = await batch('users', {
      create: [buildUser(), { name: 7, email: 'not an email' }],
      delete: [{ id: 'one' }],
      merge: [],
    });

    const problem = expectProblem(reply, 422, 'validation-failed');
    const pointers = problem.errors!.map((error) => error.pointer);
    expect(pointers).toEqual(
      expect.arrayContaining(['#/create/1/name', '#/create/1/email', '#/delete/0/id', '#/merge']),
    );
    expect(await storedEverything()).toEqual(before);
    expectProblem(await batch('users', [buildUser()]), 422, 'validation-failed');
  });

  it('POST /v1/users/batch: 413 batch-too-large saying the limit, and nothing stored, when the batch holds more than ROWI_BATCH_MAX entries', async () => {
    const before = await storedEverything();

    const reply = await batch('users', { create: Array.from({ length: 21 }, () => buildUser()) });

    const problem = expectProblem(reply, 413, 'batch-too-large');
    expect(problem).toMatchObject({ max_entries: 20, entries: 21 });
    expect(problem.detail).toContain('at most 20');
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/users/batch: 403 naming users:delete, and nothing stored, when an editor sends delete entries', async () => {
    const { key } = await createCallerWithKey(test, { role: 'editor' });
    const { user } = await createUser(test);
    const before = await storedEverything();

    const reply = await batch('users', { create: [buildUser()], delete: [{ id: user.id }] }, {}, key);

    const problem = expectProblem(reply, 403, 'insufficient-scope');
    expect(problem.required_scopes).toEqual(['users:delete']);
    expect(await storedEverything()).toEqual(before);
    expect((await batch('users', { create: [buildUser()] }, {}, key)).status).toBe(200);
  });
});

describe('POST /v1/items/batch', () => {
  it('POST /v1/items/batch: 200 with each item and its stock at 0 created, when every entry is valid', async () => {
    const reply = await batch('items', { create: [buildItem(), buildItem({ price: '10' })] });

    expect(reply.status).toBe(200);
    expect(reply.json.create.map((result: { record: { price: string } }) => result.record.price)).toEqual([
      '2.50',
      '10.00',
    ]);
    for (const result of reply.json.create as { location: string }[]) {
      expect((await test.call({ url: `${result.location}/stock` })).json).toMatchObject({ quantity: 0, reserved: 0 });
    }
  });

  it('POST /v1/items/batch: 422 batch-invalid, and nothing stored, when two creates share a SKU', async () => {
    const before = await storedEverything();
    const item = buildItem();

    const problem = expectProblem(
      await batch('items', { create: [item, { ...item, name: 'Again' }] }),
      422,
      'batch-invalid',
    );

    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/create/1']);
    expect(await storedEverything()).toEqual(before);
  });
});

describe('POST /v1/items/stock/batch', () => {
  it('POST /v1/items/stock/batch: 200 with every stock set or adjusted and a set movement each, when every entry is valid', async () => {
    const a = (await createItem(test)).item.id;
    const b = (await createItem(test)).item.id;
    await setStock(test, b, 10);

    const reply = await batch('items/stock', { set: [{ item_id: a, quantity: 7 }], adjust: [{ item_id: b, by: -4 }] });

    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      set: [
        {
          status: 200,
          location: `/v1/items/${a}/stock`,
          etag: '"v2"',
          record: expect.objectContaining({ item_id: a, quantity: 7 }),
        },
      ],
      adjust: [
        {
          status: 200,
          location: `/v1/items/${b}/stock`,
          etag: '"v3"',
          record: expect.objectContaining({ item_id: b, quantity: 6 }),
        },
      ],
    });
    const movements = await test.call({ url: `/v1/items/${b}/stock/movements` });
    expect(
      movements.json.data.map((movement: { kind: string; quantity_change: number }) => [
        movement.kind,
        movement.quantity_change,
      ]),
    ).toEqual([
      ['set', -4],
      ['set', 10],
    ]);
  });

  it('POST /v1/items/stock/batch: 409 naming #/adjust/1, and nothing stored, when an adjustment would take the stock below 0', async () => {
    const a = (await createItem(test)).item.id;
    const b = (await createItem(test)).item.id;
    await setStock(test, b, 3);
    const before = await storedEverything();

    const reply = await batch('items/stock', {
      adjust: [
        { item_id: a, by: 5 },
        { item_id: b, by: -4 },
      ],
    });

    const problem = expectProblem(reply, 409, 'batch-entry-conflict');
    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/adjust/1']);
    expect(problem.failed_entry).toMatchObject({
      type: '/problems/insufficient-stock',
      short_lines: [{ item_id: b, requested: 4, available: 3 }],
    });
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/items/stock/batch: 422 batch-invalid when set and adjust name one item', async () => {
    const a = (await createItem(test)).item.id;

    const problem = expectProblem(
      await batch('items/stock', { set: [{ item_id: a, quantity: 1 }], adjust: [{ item_id: a, by: 1 }] }),
      422,
      'batch-invalid',
    );

    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/adjust/0']);
  });
});

describe('POST /v1/orders/batch', () => {
  it('POST /v1/orders/batch: 409 naming #/create/2, nothing reserved and the ledger as it was, when the last order would oversell', async () => {
    const { user } = await createUser(test);
    const item = (await createItem(test)).item.id;
    await setStock(test, item, 5);
    const before = await storedEverything();
    const order = (quantity: number) => ({ name: 'SO', user_id: user.id, lines: [{ item_id: item, quantity }] });

    const reply = await batch('orders', { create: [order(2), order(2), order(2)] });

    const problem = expectProblem(reply, 409, 'batch-entry-conflict');
    expect(problem.errors!.map((error) => error.pointer)).toEqual(['#/create/2']);
    expect(problem.failed_entry).toMatchObject({
      type: '/problems/insufficient-stock',
      short_lines: [{ item_id: item, requested: 2, available: 1 }],
    });
    expect(await storedEverything()).toEqual(before);
  });

  it('POST /v1/orders/batch: 200 with every order placed and its stock reserved, then released by a batch that cancels and deletes them, the ledger balancing throughout', async () => {
    const { user } = await createUser(test);
    const item = (await createItem(test)).item.id;
    await setStock(test, item, 5);
    const order = (quantity: number) => ({ name: 'SO', user_id: user.id, lines: [{ item_id: item, quantity }] });
    const placed = await batch('orders', { create: [order(2), order(3)] });
    const cancelled = placed.json.create[0].record.id as number;

    const deleted = placed.json.create[1].record.id as number;
    const more = await batch('orders', { create: [order(1)] });

    const reply = await batch('orders', {
      change: [{ id: cancelled, status: 'cancelled' }],
      delete: [{ id: deleted }],
    });

    expect(placed.status).toBe(200);
    expect(placed.json.create[0]).toMatchObject({ status: 201, record: { status: 'placed', total: '5.00' } });
    expectProblem(more, 409, 'batch-entry-conflict');
    expect(reply.status).toBe(200);
    expect(reply.json.change[0]).toMatchObject({ status: 200, record: { id: cancelled, status: 'cancelled' } });
    expect(reply.json.delete[0]).toEqual({ status: 204, location: `/v1/orders/${deleted}` });
    const { inventory } = await storedEverything();
    const stock = inventory.stock.find((row) => row.item_id === item)!;
    expect(stock).toMatchObject({ quantity: 5, reserved: 0 });
    const ledger = inventory.movements.filter((movement) => movement.item_id === item);
    expect(ledger.reduce((sum, movement) => sum + movement.quantity_change, 0)).toBe(stock.quantity);
    expect(ledger.reduce((sum, movement) => sum + movement.reserved_change, 0)).toBe(stock.reserved);
  });
});

describe('batch rate limits', () => {
  let limited: TestApp;
  beforeAll(async () => {
    limited = await startApp({ ROWI_RATE_LIMIT_ADMIN: '10' });
  });
  afterAll(() => limited.close());

  it('POST /v1/users/batch: one rate-limit unit spent per entry, 429 when the entries do not fit, 413 when they never could', async () => {
    const send = (entries: number) =>
      limited.call({
        method: 'POST',
        url: '/v1/users/batch',
        body: { create: Array.from({ length: entries }, () => buildUser()) },
      });

    const first = await send(4);
    const over = await send(7);
    const never = await send(11);

    expect(first.status).toBe(200);
    expect(first.headers.ratelimit).toMatch(/^"caller";r=6;t=\d+$/);
    expectProblem(over, 429, 'rate-limited');
    expect(over.headers['retry-after']).toBeDefined();
    expect(expectProblem(never, 413, 'batch-too-large')).toMatchObject({ max_entries: 10 });
    expect((await limited.storage.db.selectFrom('users').select('id').execute()).length).toBe(4);
  });
});

describe('the orders-create budget of an orders batch', () => {
  let limited: TestApp;
  beforeAll(async () => {
    limited = await startApp({ ROWI_RATE_LIMIT_ORDERS_CREATE: '3' });
  });
  afterAll(() => limited.close());

  it('POST /v1/orders/batch: each order placed spends a unit of orders-create and a batch that places none spends nothing of it, when the budget is spent', async () => {
    const { user } = await createUser(limited);
    const { item } = await createItem(limited);
    await setStock(limited, item.id, 100);
    const order = (name: string) => ({ name, user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] });
    const batch = (body: unknown) => limited.call({ method: 'POST', url: '/v1/orders/batch', body });

    const placed = await batch({ create: [order('B-1'), order('B-2'), order('B-3')] });
    expect(placed.status).toBe(200);
    expect(placed.headers['ratelimit-policy']).toBe('"orders-create";q=3;w=60');
    expect(placed.headers.ratelimit).toMatch(/^"orders-create";r=0;t=\d+$/);
    const ids = (placed.json.create as { location: string }[]).map((entry) => Number(entry.location.split('/')[3]));

    // Cancelling orders places none: it spends nothing of the spent budget, as PATCH /v1/orders/{id} would not.
    const cancelled = await batch({ change: [{ id: ids[0], status: 'cancelled' }] });
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers['ratelimit-policy']).toBeUndefined();
    expect(expectProblem(await batch({ create: [order('B-4')] }), 429, 'rate-limited').policy).toBe('orders-create');
    expect(
      expectProblem(
        await batch({ create: [order('B-5'), order('B-6'), order('B-7'), order('B-8')] }),
        413,
        'batch-too-large',
      ),
    ).toMatchObject({ policy: 'orders-create', max_entries: 3 });
  });
});
