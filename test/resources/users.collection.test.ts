import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createUser } from '../helpers/records.js';
import { storedUsers } from '../helpers/stored.js';

let test: TestApp;
const NAMES = [
  'delta',
  'alpha',
  'charlie',
  'bravo',
  'echo',
  'alpha',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliet',
  'kilo',
];

beforeAll(async () => {
  test = await startApp();
  for (const name of NAMES) await createUser(test, { name });
});
afterAll(() => test.close());

async function allPages(url: string) {
  const pages: { ids: number[]; link: string | undefined }[] = [];
  let next: string | undefined = url;
  while (next) {
    const reply = await test.call({ url: next });
    expect(reply.status).toBe(200);
    const link = reply.headers.link as string | undefined;
    pages.push({ ids: reply.json.data.map((user: { id: number }) => user.id), link });
    if (reply.json.next_cursor === null) {
      expect(link).toBeUndefined();
      next = undefined;
    } else {
      const target = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
      expect(target, `Link header ${link}`).not.toBeNull();
      expect(target![1]).toContain(`cursor=${encodeURIComponent(reply.json.next_cursor)}`);
      next = target![1];
    }
    if (pages.length > 50) throw new Error('paging does not end');
  }
  return pages;
}

describe('GET /v1/users (paging)', () => {
  it('GET /v1/users: every user exactly once, in id order, when following Link rel="next" page by page', async () => {
    const pages = await allPages('/v1/users?limit=5');
    const ids = pages.flatMap((page) => page.ids);
    const stored = (await storedUsers(test)).map((row) => row.id);
    expect(ids).toEqual(stored);
    expect(pages.map((page) => page.ids.length)).toEqual([5, 5, 2]);
  });

  it('GET /v1/users: a single page with next_cursor null and no Link when everything fits the default limit', async () => {
    const reply = await test.call({ url: '/v1/users' });
    expect(reply.json.data).toHaveLength(NAMES.length);
    expect(reply.json.next_cursor).toBeNull();
    expect(reply.headers.link).toBeUndefined();
  });

  it('GET /v1/users: pages are stable under inserts (keyset, not offset)', async () => {
    const local = await startApp();
    try {
      for (const name of ['b1', 'b2', 'b3', 'b4']) await createUser(local, { name });
      const first = await local.call({ url: '/v1/users?sort=name&limit=2' });
      expect(first.json.data.map((user: { name: string }) => user.name)).toEqual(['b1', 'b2']);
      // Rows that sort before the cursor must not push rows of the next page back into it.
      await createUser(local, { name: 'a0' });
      await createUser(local, { name: 'b0' });
      const second = await local.call({ url: `/v1/users?sort=name&limit=2&cursor=${first.json.next_cursor}` });
      expect(second.json.data.map((user: { name: string }) => user.name)).toEqual(['b3', 'b4']);
    } finally {
      await local.close();
    }
  });

  it('GET /v1/users: sort=name,-id orders by name, ties newest first, across pages', async () => {
    const pages = await allPages('/v1/users?sort=name,-id&limit=4');
    const ids = pages.flatMap((page) => page.ids);
    const expected = (await storedUsers(test))
      .sort((a, b) => (a.name === b.name ? b.id - a.id : a.name < b.name ? -1 : 1))
      .map((row) => row.id);
    expect(ids).toEqual(expected);
  });

  it('GET /v1/users: sort=-created_at lists newest first', async () => {
    const reply = await test.call({ url: '/v1/users?sort=-created_at&limit=3' });
    const stored = (await storedUsers(test)).sort((a, b) =>
      a.created_at === b.created_at ? a.id - b.id : a.created_at < b.created_at ? 1 : -1,
    );
    expect(reply.json.data.map((user: { id: number }) => user.id)).toEqual(stored.slice(0, 3).map((row) => row.id));
  });

  it('GET /v1/users: the Link to the next page keeps the filters and sort of the request', async () => {
    const reply = await test.call({ url: '/v1/users?name=alpha&sort=-id&limit=1' });
    expect(reply.json.data).toHaveLength(1);
    const link = String(reply.headers.link);
    expect(link).toContain('name=alpha');
    expect(link).toContain('sort=-id');
    expect(link).toContain('limit=1');
    const next = await test.call({ url: /^<([^>]+)>/.exec(link)![1]! });
    expect(next.json.data).toHaveLength(1);
    expect(next.json.data[0].name).toBe('alpha');
    expect(next.json.next_cursor).toBeNull();
  });

  it('GET /v1/users: the collection in XML wraps users in <data> and marks a null cursor with nil', async () => {
    const reply = await test.call({ url: '/v1/users?name=bravo', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toMatch(
      /^<\?xml[^>]+>\n<users><data><user><id>\d+<\/id><name>bravo<\/name>.*<\/user><\/data><next_cursor nil="true"\/><\/users>$/,
    );
  });
});

describe('GET /v1/users (filters)', () => {
  it('GET /v1/users: ?email= matches without regard to case', async () => {
    const { user } = await createUser(test, { email: 'Filter.Me@Example.com' });
    const reply = await test.call({ url: '/v1/users?email=filter.me@EXAMPLE.com' });
    expect(reply.json.data).toEqual([user]);
  });

  it('GET /v1/users: ?name= is an exact match', async () => {
    const reply = await test.call({ url: '/v1/users?name=alpha' });
    expect(reply.json.data.map((user: { name: string }) => user.name)).toEqual(['alpha', 'alpha']);
  });

  it('GET /v1/users: created_after and created_before are exclusive bounds', async () => {
    const stored = await storedUsers(test);
    const middle = stored[5]!;
    const after = await test.call({
      url: `/v1/users?limit=500&created_after=${encodeURIComponent(middle.created_at)}`,
    });
    expect(after.json.data.every((user: { created_at: string }) => user.created_at > middle.created_at)).toBe(true);
    expect(after.json.data.length).toBe(stored.filter((row) => row.created_at > middle.created_at).length);
    const before = await test.call({
      url: `/v1/users?limit=500&created_before=${encodeURIComponent(middle.created_at)}`,
    });
    expect(before.json.data.length).toBe(stored.filter((row) => row.created_at < middle.created_at).length);
  });

  it('GET /v1/users: created_after accepts any RFC 3339 offset', async () => {
    const reply = await test.call({
      url: `/v1/users?created_after=${encodeURIComponent('2000-01-01T02:00:00+02:00')}`,
    });
    expect(reply.status).toBe(200);
    expect(reply.json.data.length).toBeGreaterThan(0);
  });
});

describe('GET /v1/users (bad query parameters)', () => {
  it.each([
    ['limit=0', 'limit'],
    ['limit=501', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['nosuch=1', 'nosuch'],
    ['sort=password', 'sort'],
    ['sort=name,name', 'sort'],
    ['sort=', 'sort'],
    ['created_after=yesterday', 'created_after'],
    ['created_before=2026-13-01T00:00:00Z', 'created_before'],
    ['cursor=', 'cursor'],
    ['cursor=not-a-cursor', 'cursor'],
    ['cursor=WyJpZCIsMV0', 'cursor'],
    ['cursor=WyJpZCIsMV0.AAAAAAAAAAAA', 'cursor'],
  ])('GET /v1/users?%s: 400 invalid-query pointing at %s', async (query, parameter) => {
    const reply = await test.call({ url: `/v1/users?${query}` });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.[0]).toMatchObject({ in: 'query', pointer: `#/${parameter}` });
  });

  it('GET /v1/users: 400 when a real cursor is truncated or altered', async () => {
    const first = await test.call({ url: '/v1/users?limit=2' });
    const cursor: string = first.json.next_cursor;
    for (const forged of [
      cursor.slice(0, -1),
      cursor.slice(1),
      `${cursor.slice(0, 3)}${cursor[3] === 'A' ? 'B' : 'A'}${cursor.slice(4)}`,
    ]) {
      const reply = await test.call({ url: `/v1/users?limit=2&cursor=${encodeURIComponent(forged)}` });
      expectProblem(reply, 400, 'invalid-query');
    }
  });

  it('GET /v1/users: 400 when a cursor is replayed with another sort', async () => {
    const first = await test.call({ url: '/v1/users?limit=2&sort=name' });
    const reply = await test.call({ url: `/v1/users?limit=2&sort=-name&cursor=${first.json.next_cursor}` });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.detail).toContain('sort=name');
  });
});
