import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey, createItem, createUser, setStock } from '../helpers/records.js';

/** Many records by id (docs/reading.md): ?id=1,2,3 or repeated id= on every collection. */
let test: TestApp;
const users: number[] = [];
const items: number[] = [];

beforeAll(async () => {
  test = await startApp();
  for (let n = 0; n < 4; n++) users.push((await createUser(test)).user.id);
  for (let n = 0; n < 3; n++) {
    const { item } = await createItem(test);
    await setStock(test, item.id, 10 + n);
    items.push(item.id);
  }
});
afterAll(() => test.close());

const idsOf = (reply: { json: { data: { id: number }[] } }) => reply.json.data.map((record) => record.id);

describe('GET /v1/<collection>?id=', () => {
  it('GET /v1/users?id=: those users, in the sort asked for, comma-separated or repeated, missing ids absent', async () => {
    const [a, b, c] = users as [number, number, number];
    const listed = await test.call({ url: `/v1/users?id=${c},${a},999999&sort=-id` });
    expect(listed.status).toBe(200);
    expect(idsOf(listed)).toEqual([c, a]);
    const repeated = await test.call({ url: `/v1/users?id=${b}&id=${a},${b}` });
    expect(idsOf(repeated)).toEqual([a, b]);
  });

  it('GET /v1/items?id= and /v1/orders?id=: the same on every collection, with the page holding every id asked for', async () => {
    const reply = await test.call({ url: `/v1/items?id=${items.join(',')}` });
    expect(idsOf(reply)).toEqual(items);
    const limited = await test.call({ url: `/v1/items?id=${items.join(',')}&limit=2` });
    expect(idsOf(limited)).toEqual(items.slice(0, 2));
    expect(limited.json.next_cursor).not.toBeNull();
    const none = await test.call({ url: '/v1/orders?id=1' });
    expect(none.status).toBe(200);
    expect(none.json.data).toEqual([]);
  });

  it('GET /v1/items/stock?id=: the stock of many items in one call; items the caller may not see are absent', async () => {
    const reply = await test.call({ url: `/v1/items/stock?id=${items.join(',')},999999` });
    expect(reply.status).toBe(200);
    expect(
      reply.json.data.map((stock: { item_id: number; quantity: number }) => [stock.item_id, stock.quantity]),
    ).toEqual(items.map((id, n) => [id, 10 + n]));
    const { key } = await createCallerWithKey(test, { role: 'reader', removed_scopes: ['items:read'] });
    expectProblem(await test.call({ url: `/v1/items/stock?id=${items[0]}`, key }), 403, 'insufficient-scope');
    const created = await test.call({
      method: 'POST',
      url: '/v1/callers',
      body: { name: 'stock-reader-own', role: 'reader', record_access: { users: 'own', items: 'own', orders: 'own' } },
    });
    const own = (await test.call({ method: 'POST', url: `/v1/callers/${created.json.id}/keys`, body: {} })).json.key;
    const hidden = await test.call({ url: `/v1/items/stock?id=${items.join(',')}`, key: own });
    expect(hidden.status).toBe(200);
    expect(hidden.json.data).toEqual([]);
  });

  it('GET /v1/users?id=: 400 naming id for a negative, a non-number, an empty id, more than 500 ids or an id past the largest', async () => {
    for (const bad of ['-1', 'abc', '1,,2', '0', '1.5', '99999999999999999']) {
      const problem = expectProblem(await test.call({ url: `/v1/users?id=${bad}` }), 400, 'invalid-query');
      expect(JSON.stringify(problem)).toContain('#/id');
    }
    const many = Array.from({ length: 501 }, (_, n) => n + 1).join(',');
    const tooMany = expectProblem(await test.call({ url: `/v1/users?id=${many}` }), 400, 'invalid-query');
    expect(tooMany.detail).toContain('500');
    const huge = Array.from({ length: 100_000 }, (_, n) => n + 1).join(',');
    expectProblem(await test.call({ url: `/v1/users?id=${huge}` }), 400, 'invalid-query');
    const repeated = Array.from({ length: 3 }, () => `id=${Array.from({ length: 200 }, (_, n) => n + 1).join(',')}`);
    expect((await test.call({ url: `/v1/users?${repeated.join('&')}` })).status).toBe(200);
    const spread = Array.from({ length: 501 }, (_, n) => `id=${n + 1}`).join('&');
    expectProblem(await test.call({ url: `/v1/users?${spread}` }), 400, 'invalid-query');
  });

  it('GET /v1/events?id= and /v1/audit-events?id=: event ids, and audit event ids', async () => {
    const events = await test.call({ url: '/v1/events?limit=2' });
    const wanted = events.json.data.map((event: { id: string }) => event.id);
    const byId = await test.call({ url: `/v1/events?id=${wanted.join(',')}` });
    expect(byId.json.data.map((event: { id: string }) => event.id)).toEqual(wanted);
    expectProblem(await test.call({ url: '/v1/events?id=1' }), 400, 'invalid-query');
    expect((await test.call({ url: '/v1/audit-events?id=1,2' })).status).toBe(200);
  });
});
