import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';

/** Related records in one call (docs/reading.md): expand= on orders and on stock movements. */
let test: TestApp;
let user: { id: number; name: string; email: string };
let items: { id: number; name: string; price: string }[];
let order: { id: number };
let other: { id: number };

async function ownCaller(name: string, role: 'reader' | 'editor') {
  const created = await test.call({
    method: 'POST',
    url: '/v1/callers',
    body: { name, role, record_access: { users: 'own', items: 'own', orders: 'own' } },
  });
  return (await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} })).json.key as string;
}

beforeAll(async () => {
  test = await startApp();
  user = (await createUser(test)).user;
  items = [];
  for (let n = 0; n < 2; n++) {
    const { item } = await createItem(test);
    await setStock(test, item.id, 100);
    items.push(item);
  }
  const lines = items.map((item, n) => ({ item_id: item.id, quantity: n + 1 }));
  order = (await test.call({ method: 'POST', url: '/v1/orders', body: { name: 'a', user_id: user.id, lines } })).json;
  other = (await test.call({ method: 'POST', url: '/v1/orders', body: { name: 'b', user_id: user.id, lines } })).json;
});
afterAll(() => test.close());

/** What `call` answers, and the SQL of every statement the app ran meanwhile (through the database handle's one executor: watched, not replaced). */
async function statementsOf<T>(call: () => Promise<T>): Promise<{ reply: T; statements: string[] }> {
  const executor = test.storage.db.getExecutor();
  const statements: string[] = [];
  const execute = executor.executeQuery.bind(executor);
  executor.executeQuery = (query, ...rest) => {
    statements.push(query.sql);
    return execute(query, ...rest);
  };
  try {
    return { reply: await call(), statements };
  } finally {
    executor.executeQuery = execute;
  }
}

describe('GET /v1/orders?expand=', () => {
  it("GET /v1/orders/{id}: 200 with the user and each line's item embedded when expand=user,lines.item; plain without", async () => {
    const plain = await test.call({ url: `/v1/orders/${order.id}` });
    expect(plain.json).not.toHaveProperty('user');
    expect(plain.json.lines[0]).not.toHaveProperty('item');
    const expanded = await test.call({ url: `/v1/orders/${order.id}?expand=user,lines.item` });
    expect(expanded.status).toBe(200);
    expect(expanded.json.user).toMatchObject({ id: user.id, name: user.name, email: user.email });
    expect(expanded.json.user).not.toHaveProperty('version');
    expect(expanded.json.lines.map((line: { item: unknown }) => line.item)).toEqual(
      items.map((item) => expect.objectContaining({ id: item.id, name: item.name, price: item.price })),
    );
    expect(expanded.json.lines[0].item).not.toHaveProperty('stock');
    const { user: _user, lines, ...rest } = expanded.json;
    const { lines: plainLines, ...plainRest } = plain.json;
    expect(rest).toEqual(plainRest);
    expect(lines.map(({ item: _item, ...line }: Record<string, unknown>) => line)).toEqual(plainLines);
  });

  it('GET /v1/orders/{id}: expand=lines.item.stock embeds each item with its stock (and so the item); repeated expand= too', async () => {
    const reply = await test.call({ url: `/v1/orders/${order.id}?expand=lines.item.stock&expand=user` });
    expect(reply.status).toBe(200);
    expect(reply.json.user.id).toBe(user.id);
    expect(reply.json.lines[0].item.stock).toEqual({
      item_id: items[0]!.id,
      quantity: 100 - 2,
      reserved: 2,
      updated_at: expect.any(String),
    });
  });

  it('GET /v1/orders: every order of the page with its expansions, in JSON and in XML', async () => {
    const reply = await test.call({ url: '/v1/orders?expand=user,lines.item' });
    expect(reply.status).toBe(200);
    expect(reply.json.data.map((listed: { id: number; user: { id: number } }) => [listed.id, listed.user.id])).toEqual([
      [order.id, user.id],
      [other.id, user.id],
    ]);
    expect(reply.json.data[1].lines[1].item.id).toBe(items[1]!.id);
    const xml = await test.call({ url: '/v1/orders?expand=user', headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(200);
    expect(xml.text).toContain(`<user><id>${user.id}</id><name>${user.name}</name>`);
  });

  it("GET /v1/orders: a page's records of one path are read in one query, however many orders refer to them", async () => {
    for (let n = 0; n < 8; n++) {
      const { user: another } = await createUser(test);
      const lines = [{ item_id: items[n % 2]!.id, quantity: 1 }];
      await test.call({ method: 'POST', url: '/v1/orders', body: { name: `n${n}`, user_id: another.id, lines } });
    }
    const { reply, statements } = await statementsOf(() =>
      test.call({ url: '/v1/orders?expand=user,lines.item.stock&limit=50' }),
    );
    expect(reply.status).toBe(200);
    expect(reply.json.data.length).toBeGreaterThanOrEqual(10);
    expect(reply.json.data.every((listed: { user: { id: number } }) => listed.user.id > 0)).toBe(true);
    const reading = (table: string) => statements.filter((sql) => new RegExp(`from "${table}"`).test(sql));
    expect(reading('users')).toHaveLength(1);
    expect(reading('items')).toHaveLength(1);
    expect(reading('stock')).toHaveLength(1);
  });

  it('GET /v1/orders/{id}: the expanded ETag is another than the plain one; 304 only for its own, a new one once the user changes', async () => {
    const plain = await test.call({ url: `/v1/orders/${order.id}` });
    const url = `/v1/orders/${order.id}?expand=user`;
    const expanded = await test.call({ url });
    const tag = String(expanded.headers.etag);
    expect(tag).not.toBe(plain.headers.etag);
    expect(tag.startsWith('W/')).toBe(true);
    expect((await test.call({ url, headers: { 'if-none-match': String(plain.headers.etag) } })).status).toBe(200);
    expect((await test.call({ url, headers: { 'if-none-match': tag } })).status).toBe(304);
    const plainHit = await test.call({ url: `/v1/orders/${order.id}`, headers: { 'if-none-match': tag } });
    expect(plainHit.status).toBe(200);
    const xml = await test.call({ url, headers: { accept: 'application/xml' } });
    expect(xml.headers.etag).not.toBe(tag);
    await test.call({ method: 'PATCH', url: `/v1/users/${user.id}`, body: { name: 'Renamed' } });
    const after = await test.call({ url, headers: { 'if-none-match': tag } });
    expect(after.status).toBe(200);
    expect(after.json.user.name).toBe('Renamed');
    // A write's If-Match takes the record's own tag only.
    const refused = await test.call({
      method: 'PATCH',
      url: `/v1/orders/${order.id}`,
      body: { name: 'x' },
      headers: { 'if-match': String(after.headers.etag) },
    });
    expectProblem(refused, 412, 'precondition-failed');
  });

  it('GET /v1/orders/{id}: 403 naming the path when the caller may not read what it embeds; the plain read still 200', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['users:read', 'stock:read'] });
    expect((await test.call({ url: `/v1/orders/${order.id}`, key })).status).toBe(200);
    const problem = expectProblem(
      await test.call({ url: `/v1/orders/${order.id}?expand=lines.item,user`, key }),
      403,
      'insufficient-scope',
    );
    expect(problem.detail).toContain('user');
    expect(problem.detail).not.toContain(user.email);
    expect(problem.required_scopes).toEqual(['users:read']);
    expect(problem.errors).toEqual([{ in: 'query', pointer: '#/expand', detail: 'user needs users:read' }]);
    const stock = expectProblem(
      await test.call({ url: `/v1/orders?expand=lines.item.stock`, key }),
      403,
      'insufficient-scope',
    );
    expect(stock.errors![0]!.detail).toBe('lines.item.stock needs stock:read');
    // Refused before the order is looked up: an id that does not exist is 403 too, not 404.
    expectProblem(await test.call({ url: '/v1/orders/999999?expand=user', key }), 403, 'insufficient-scope');
  });

  it('GET /v1/orders/{id}: a user or item the caller may not see is embedded as null', async () => {
    const key = await ownCaller('expand-own', 'editor');
    const ownUser = (
      await test.call({ method: 'POST', url: '/v1/users', key, body: { name: 'Own', email: 'own-expand@example.com' } })
    ).json;
    const ownItem = (
      await test.call({ method: 'POST', url: '/v1/items', key, body: { name: 'Own', sku: 'OWN-EXP', price: '1.00' } })
    ).json;
    await setStock(test, ownItem.id, 5);
    const placed = await test.call({
      method: 'POST',
      url: '/v1/orders',
      key,
      body: { name: 'own', user_id: ownUser.id, lines: [{ item_id: ownItem.id, quantity: 1 }] },
    });
    // The admin gives the order another user, and a line of an item the caller does not see.
    await test.call({
      method: 'PUT',
      url: `/v1/orders/${placed.json.id}`,
      body: {
        name: 'own',
        user_id: user.id,
        lines: [
          { item_id: ownItem.id, quantity: 1 },
          { item_id: items[0]!.id, quantity: 1 },
        ],
      },
    });
    const reply = await test.call({ url: `/v1/orders/${placed.json.id}?expand=user,lines.item.stock`, key });
    expect(reply.status).toBe(200);
    expect(reply.json.user).toBeNull();
    expect(reply.json.lines.map((line: { item: { id: number } | null }) => line.item?.id ?? null)).toEqual([
      ownItem.id,
      null,
    ]);
    expect(reply.json.lines[0].item.stock.item_id).toBe(ownItem.id);
    const listed = await test.call({ url: '/v1/orders?expand=user', key });
    expect(listed.json.data.map((seen: { id: number; user: unknown }) => [seen.id, seen.user])).toEqual([
      [placed.json.id, null],
    ]);
  });

  it('GET /v1/orders: 400 invalid-query naming the path for an unknown path, a cycle, a duplicate, too many or too long, an empty one', async () => {
    const cases: [string, string][] = [
      ['customer', 'customer'],
      ['lines.item.stock.item', 'cycle'],
      ['user,user', 'user twice'],
      ['user,', 'empty'],
      ['lines', 'lines'],
      [`${'a'.repeat(65)}`, '65 characters'],
      [Array.from({ length: 1000 }, () => 'user').join(','), 'characters'],
      [Array.from({ length: 11 }, (_, n) => `p${n}`).join(','), '11 paths'],
    ];
    for (const [expand, said] of cases) {
      for (const url of [`/v1/orders?expand=${expand}`, `/v1/orders/${order.id}?expand=${expand}`]) {
        const problem = expectProblem(await test.call({ url }), 400, 'invalid-query');
        expect(problem.detail, url).toContain(said);
        expect(problem.errors![0]!.pointer).toBe('#/expand');
      }
    }
  });
});

describe('GET /v1/items/{id}/stock/movements?expand=', () => {
  it("expand=order,order.user embeds each movement's order and its user; a set has null", async () => {
    const reply = await test.call({ url: `/v1/items/${items[0]!.id}/stock/movements?expand=order.user,order` });
    expect(reply.status).toBe(200);
    const byKind = reply.json.data.map(
      (movement: { kind: string; order_id: number | null; order: { id: number; user: { id: number } } | null }) => [
        movement.kind,
        movement.order?.id ?? null,
        movement.order?.user.id ?? null,
      ],
    );
    expect(byKind).toContainEqual(['set', null, null]);
    expect(byKind).toContainEqual(['reserve', order.id, user.id]);
  });

  it('400 for depth 3 (order.lines.item.stock), 403 without orders:read', async () => {
    const deep = expectProblem(
      await test.call({ url: `/v1/items/${items[0]!.id}/stock/movements?expand=order.lines.item.stock` }),
      400,
      'invalid-query',
    );
    expect(deep.detail).toContain('3 levels deep');
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['orders:read'] });
    const refused = expectProblem(
      await test.call({ url: `/v1/items/${items[0]!.id}/stock/movements?expand=order`, key }),
      403,
      'insufficient-scope',
    );
    expect(refused.errors![0]!.detail).toBe('order needs orders:read');
  });
});

describe('expand= with fields=', () => {
  it('GET /v1/orders/{id}: 200 with only the fields asked for, inside the records embedded too, when expand and fields name them', async () => {
    const url = `/v1/orders/${order.id}?expand=user,lines.item&fields=id,user.email,lines.item.name`;
    const reply = await test.call({ url: `${url}&expand=lines.item.stock` });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      id: order.id,
      user: { email: user.email },
      lines: items.map((item) => ({ item: { name: item.name } })),
    });
    const xml = await test.call({ url, headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(200);
    expect(xml.text).toContain(`<user><email>${user.email}</email></user>`);
    expect(xml.text).not.toContain('<price>');
    // A field of the order only: the embedded records are not answered.
    const own = await test.call({ url: `/v1/orders/${order.id}?expand=user&fields=name` });
    expect(own.json).toEqual({ id: order.id, name: 'a' });
  });

  it('GET /v1/orders: each order of the page with only the fields asked for, its user among them', async () => {
    const reply = await test.call({ url: '/v1/orders?expand=user&fields=name,user.name&limit=2' });
    expect(reply.status).toBe(200);
    expect(reply.json.data).toEqual([
      { id: order.id, name: 'a', user: { name: expect.any(String) } },
      { id: other.id, name: 'b', user: { name: expect.any(String) } },
    ]);
  });

  it('GET /v1/orders, /v1/orders/{id} and the movements: 400 naming the field and the path when fields names inside a record not expanded', async () => {
    const cases: [string, string[]][] = [
      [`/v1/orders/${order.id}?fields=user.email`, ['user.email', 'expand=user']],
      ['/v1/orders?fields=name,user', ['names user,', 'expand=user']],
      [`/v1/orders/${order.id}?expand=user&fields=lines.item.name`, ['lines.item.name', 'expand=lines.item']],
      [
        `/v1/orders?expand=lines.item&fields=lines.item.stock.quantity`,
        ['lines.item.stock.quantity', 'expand=lines.item.stock'],
      ],
      [`/v1/items/${items[0]!.id}/stock/movements?fields=order.name`, ['order.name', 'expand=order']],
      [`/v1/items/${items[0]!.id}/stock/movements?expand=order&fields=order.user.email`, ['expand=order.user']],
    ];
    for (const [url, said] of cases) {
      const problem = expectProblem(await test.call({ url }), 400, 'invalid-query');
      for (const text of said) expect(problem.detail, url).toContain(text);
      expect(problem.errors![0]!.pointer).toBe('#/fields');
    }
    // A name of the record's own (lines) takes what is expanded in it, and needs no expand.
    expect((await test.call({ url: `/v1/orders/${order.id}?fields=lines` })).status).toBe(200);
  });

  it('GET /v1/orders/{id}: the ETag of expand with fields is another than with either alone; 304 for its own, however written', async () => {
    const base = `/v1/orders/${order.id}`;
    const both = await test.call({ url: `${base}?expand=user&fields=user.email` });
    const tag = String(both.headers.etag);
    expect(tag.startsWith('W/')).toBe(true);
    const expandedOnly = String((await test.call({ url: `${base}?expand=user` })).headers.etag);
    const fieldsOnly = String((await test.call({ url: `${base}?fields=name` })).headers.etag);
    const otherFields = String((await test.call({ url: `${base}?expand=user&fields=user.name` })).headers.etag);
    expect(new Set([tag, expandedOnly, fieldsOnly, otherFields]).size).toBe(4);
    const again = `${base}?fields=user.email,id,user.email&expand=user`;
    expect((await test.call({ url: again, headers: { 'if-none-match': tag } })).status).toBe(304);
    for (const url of [`${base}?expand=user`, `${base}?expand=user&fields=user.name`])
      expect((await test.call({ url, headers: { 'if-none-match': tag } })).status, url).toBe(200);
  });

  it('GET /v1/orders/{id}: 403 naming the path when the caller may not read what fields and expand name', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['users:read'] });
    const problem = expectProblem(
      await test.call({ url: `/v1/orders/${order.id}?expand=user&fields=user.email`, key }),
      403,
      'insufficient-scope',
    );
    expect(problem.errors).toEqual([{ in: 'query', pointer: '#/expand', detail: 'user needs users:read' }]);
  });
});

describe('exports with expand=', () => {
  const SEEDED = 1100; // three chunks of 500 (http/export.ts) with the orders made above
  let seededUsers: { id: number; email: string }[];
  const csv = { accept: 'text/csv' };
  const ndjson = { accept: 'application/x-ndjson' };

  beforeAll(async () => {
    // Set-based seeding, not the API: a user per order, each order one line of the first item.
    const now = new Date().toISOString();
    const { db } = test.storage;
    const users = Array.from({ length: SEEDED }, (_, n) => {
      const email = `exported${n}@example.com`;
      return {
        name: `Exported ${n}`,
        email,
        email_key: email,
        created_by: null,
        version: 1,
        created_at: now,
        updated_at: now,
      };
    });
    seededUsers = [];
    for (let start = 0; start < SEEDED; start += 500)
      seededUsers.push(
        ...(await db
          .insertInto('users')
          .values(users.slice(start, start + 500))
          .returning(['id', 'email'])
          .execute()),
      );
    for (let start = 0; start < SEEDED; start += 500) {
      const orders = seededUsers.slice(start, start + 500).map((seeded, n) => ({
        name: `exported ${start + n}`,
        user_id: seeded.id,
        status: 'fulfilled' as const,
        total: 250,
        created_by: null,
        version: 1,
        created_at: now,
        updated_at: now,
      }));
      const ids = await db.insertInto('orders').values(orders).returning('id').execute();
      const lines = ids.map(({ id }) => ({
        order_id: id,
        item_id: items[0]!.id,
        position: 0,
        quantity: 1,
        unit_price: 250,
      }));
      await db.insertInto('order_lines').values(lines).execute();
    }
  });

  it('GET /v1/orders: CSV with the user and the items embedded as dotted columns, each chunk expanded by one query per relation', async () => {
    const { reply, statements } = await statementsOf(() =>
      test.call({ url: '/v1/orders?expand=user,lines.item', headers: csv }),
    );
    expect(reply.status).toBe(200);
    const rows = reply.text
      .trimEnd()
      .split('\r\n')
      .map((row) => row.split(','));
    const header = rows[0]!;
    expect(header.slice(0, 6)).toEqual(['id', 'name', 'user_id', 'user.id', 'user.name', 'user.email']);
    expect(header).toContain('lines.item.name');
    expect(header).not.toContain('lines.item.stock.quantity');
    const column = (name: string) => header.indexOf(name);
    const last = rows[rows.length - 1]!;
    expect(last[column('user.email')]).toBe(seededUsers[SEEDED - 1]!.email);
    expect(last[column('lines.item.name')]).toBe(items[0]!.name);
    const orders = new Set(rows.slice(1).map((row) => row[0])).size;
    expect(orders).toBeGreaterThan(SEEDED);
    const chunks = Math.ceil(orders / 500);
    const reading = (table: string) => statements.filter((sql) => new RegExp(`from "${table}"`).test(sql));
    expect(reading('orders')).toHaveLength(chunks + 1); // and the size check before the first
    expect(reading('users')).toHaveLength(chunks);
    expect(reading('items')).toHaveLength(chunks);
  });

  it('GET /v1/orders: NDJSON with expand and fields holds each order with the fields asked for of its user', async () => {
    const reply = await test.call({ url: '/v1/orders?expand=user&fields=name,user.email', headers: ndjson });
    expect(reply.status).toBe(200);
    const lines = reply.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).toEqual({ id: order.id, name: 'a', user: { email: expect.any(String) } });
    expect(lines[lines.length - 1]).toEqual({
      id: expect.any(Number),
      name: `exported ${SEEDED - 1}`,
      user: { email: seededUsers[SEEDED - 1]!.email },
    });
    const sheet = await test.call({
      url: '/v1/orders?expand=user,lines.item&fields=name,user.email,lines.item.name',
      headers: csv,
    });
    expect(sheet.text.slice(0, sheet.text.indexOf('\r\n'))).toBe('id,name,user.email,lines.item.name');
  });

  it('GET /v1/orders: an export with expand is 403 naming the path for a caller without the scope, 400 for a field not expanded', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['users:read'] });
    for (const headers of [csv, ndjson]) {
      const problem = expectProblem(
        await test.call({ url: '/v1/orders?expand=user', headers, key }),
        403,
        'insufficient-scope',
      );
      expect(problem.errors![0]!.detail).toBe('user needs users:read');
      expectProblem(await test.call({ url: '/v1/orders?fields=user.email', headers }), 400, 'invalid-query');
    }
  });

  it("GET /v1/items/{id}/stock/movements: CSV with each movement's order and its user as dotted columns, a row per line of the order", async () => {
    const reply = await test.call({
      url: `/v1/items/${items[1]!.id}/stock/movements?expand=order.user`,
      headers: csv,
    });
    expect(reply.status).toBe(200);
    const rows = reply.text
      .trimEnd()
      .split('\r\n')
      .map((row) => row.split(','));
    const header = rows[0]!;
    for (const name of ['order.name', 'order.user.email', 'order.lines.item_id']) expect(header).toContain(name);
    const ofOrder = rows.filter((row) => row[header.indexOf('order.id')] === String(order.id));
    // The reserve of the order's second item: one row for each of the order's two lines.
    expect(ofOrder.map((row) => row[header.indexOf('order.lines.item_id')])).toEqual(
      items.map((item) => String(item.id)),
    );
    expect(ofOrder[0]![header.indexOf('order.user.email')]).toBe(user.email);
  });
});
