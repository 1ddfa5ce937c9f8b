import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

let test: TestApp;
const users: Record<string, number> = {};

beforeAll(async () => {
  test = await startApp();
  const made: [string, string][] = [
    ['Ada Lovelace', 'ada@analytical.example'],
    ['Grace Hopper', 'grace@navy.example'],
    ['ADA King', 'countess@example.org'],
    ['Percent 100%', 'percent@example.org'],
    ['Under_score', 'under@example.org'],
    ['Back\\slash', 'back@example.org'],
    ['Plain 100x', 'plain@example.org'],
    ['Underxscore', 'underx@example.org'],
    ['Backxslash', 'backx@example.org'],
  ];
  for (const [name, email] of made) users[name] = (await createUser(test, { name, email })).user.id;
});
afterAll(() => test.close());

async function namesOf(query: string): Promise<string[]> {
  const reply = await test.call({ url: `/v1/users?${query}` });
  expect(reply.status, reply.text).toBe(200);
  return reply.json.data.map((user: { name: string }) => user.name);
}

describe('GET /v1/users?q=', () => {
  it('GET /v1/users?q=: the users whose name holds the text anywhere, ignoring ASCII case', async () => {
    expect(await namesOf('q=ada')).toEqual(['Ada Lovelace', 'ADA King']);
    expect(await namesOf('q=OPPE')).toEqual(['Grace Hopper']);
  });

  it('GET /v1/users?q=: the users whose email holds the text', async () => {
    expect(await namesOf('q=NAVY.ex')).toEqual(['Grace Hopper']);
    expect(await namesOf('q=countess')).toEqual(['ADA King']);
  });

  it('GET /v1/users?q=: letters beyond ASCII match only in the same case, on either database', async () => {
    const { user } = await createUser(test, { name: 'Émile Zoë' });
    expect(await namesOf(`q=${encodeURIComponent('mile zoë')}`)).toEqual(['Émile Zoë']);
    expect(await namesOf(`q=${encodeURIComponent('éMILE')}`)).toEqual([]);
    await test.call({ method: 'DELETE', url: `/v1/users/${user.id}` });
  });

  it('GET /v1/users?q=: %, _ and \\ stand for themselves', async () => {
    expect(await namesOf(`q=${encodeURIComponent('100%')}`)).toEqual(['Percent 100%']);
    expect(await namesOf(`q=${encodeURIComponent('r_s')}`)).toEqual(['Under_score']);
    expect(await namesOf(`q=${encodeURIComponent('k\\s')}`)).toEqual(['Back\\slash']);
  });

  it('GET /v1/users?q=: an empty page when nothing holds the text', async () => {
    const reply = await test.call({ url: '/v1/users?q=nobody-has-this' });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ data: [], next_cursor: null });
  });

  it('GET /v1/users?q=: combined with another filter, both hold', async () => {
    expect(await namesOf('q=ada&name=ADA%20King')).toEqual(['ADA King']);
    expect(await namesOf('q=grace&name=ADA%20King')).toEqual([]);
  });

  it('GET /v1/users?q=: every match once across pages, the Link repeating q and the sort', async () => {
    const seen: string[] = [];
    let url: string | undefined = '/v1/users?q=example.org&sort=-name&limit=2';
    while (url) {
      const reply = await test.call({ url });
      expect(reply.status).toBe(200);
      seen.push(...reply.json.data.map((user: { name: string }) => user.name));
      const link = reply.headers.link as string | undefined;
      if (link) expect(link).toContain('q=example.org');
      url = link ? /^<([^>]+)>/.exec(link)![1] : undefined;
    }
    expect(seen).toEqual([
      'Underxscore',
      'Under_score',
      'Plain 100x',
      'Percent 100%',
      'Backxslash',
      'Back\\slash',
      'ADA King',
    ]);
  });

  it('GET /v1/users?q=: an export (CSV and NDJSON) holds only the matches', async () => {
    const csv = await test.call({ url: '/v1/users?q=ada', headers: { accept: 'text/csv' } });
    expect(csv.status).toBe(200);
    expect(csv.text.trim().split('\r\n')).toHaveLength(3);
    expect(csv.text).toContain('Ada Lovelace');
    expect(csv.text).toContain('ADA King');
    const ndjson = await test.call({ url: '/v1/users?q=hopper', headers: { accept: 'application/x-ndjson' } });
    expect(ndjson.status).toBe(200);
    const lines = ndjson.text.trim().split('\n');
    expect(lines.map((line) => JSON.parse(line).name)).toEqual(['Grace Hopper']);
  });

  it.each([
    ['q=', 'must not be empty'],
    [`q=${'x'.repeat(201)}`, 'must be at most 200 characters long'],
  ])('GET /v1/users?%s: 400 invalid-query saying q %s', async (query, says) => {
    const reply = await test.call({ url: `/v1/users?${query}` });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.[0]).toMatchObject({ in: 'query', pointer: '#/q' });
    expect(problem.detail).toBe(`Query parameter q ${says}.`);
  });

  it('HEAD /v1/users?q=: 400 as GET when q is empty, 200 when valid', async () => {
    expect((await test.call({ method: 'HEAD', url: '/v1/users?q=' })).status).toBe(400);
    expect((await test.call({ method: 'HEAD', url: '/v1/users?q=ada' })).status).toBe(200);
  });
});

describe('GET /v1/items?q= and /v1/orders?q=', () => {
  it('GET /v1/items?q=: the items whose name or SKU holds the text', async () => {
    const { item: widget } = await createItem(test, { name: 'Blue Widget', sku: 'BW-1' });
    const { item: gadget } = await createItem(test, { name: 'Gadget', sku: 'GAD-WIDG-2' });
    await createItem(test, { name: 'Sprocket', sku: 'SP-3' });
    const reply = await test.call({ url: '/v1/items?q=widg' });
    expect(reply.json.data.map((item: { id: number }) => item.id)).toEqual([widget.id, gadget.id]);
  });

  it("GET /v1/orders?q=: the orders whose name (the caller's reference) holds the text", async () => {
    const { item } = await createItem(test);
    await setStock(test, item.id, 10);
    const ids: number[] = [];
    for (const name of ['PO-2026-Alpha', 'po-2026-beta', 'Other']) {
      const body = { name, user_id: users['Ada Lovelace'], lines: [{ item_id: item.id, quantity: 1 }] };
      ids.push((await test.call({ method: 'POST', url: '/v1/orders', body })).json.id);
    }
    const reply = await test.call({ url: '/v1/orders?q=PO-2026' });
    expect(reply.json.data.map((order: { id: number }) => order.id)).toEqual(ids.slice(0, 2));
  });
});
