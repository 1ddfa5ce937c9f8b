import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type Reply, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildObservation, weatherHelpers } from '../helpers/weather.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const { newPlace, recordObservation, storedPlace, storedObservations, storedWeather } = weatherHelpers(() => test);

let nameSequence = 0;

/** A display name no other test uses: the list tests filter by it to see only their own places. */
function newName(): string {
  nameSequence++;
  return `Town ${nameSequence}`;
}

/** Records one observation per instant, in the order given; returns the place's stored id. */
async function placeWithHistory(place: string, instants: string[]) {
  for (const [index, observedAt] of instants.entries())
    await recordObservation(place, { observed_at: observedAt, temperature_c: index });
  return (await storedPlace(place))!.id;
}

/** Follows next_cursor from the first URL to the last page; returns every page's reply. */
async function allPages(firstUrl: string): Promise<Reply[]> {
  const pages: Reply[] = [];
  let url: string | undefined = firstUrl;
  while (url !== undefined && pages.length < 20) {
    const page = await test.call({ url });
    if (page.status !== 200) throw new Error(`page ${pages.length + 1}: ${page.status} ${page.text}`);
    pages.push(page);
    url = page.json.next_cursor === null ? undefined : `${firstUrl}&cursor=${page.json.next_cursor}`;
  }
  return pages;
}

/**
 * The target of a reply's Link rel="next", as path and query parameters (the query is compared
 * decoded: the app may percent-encode it differently from how the test wrote it).
 */
function nextLink(reply: Reply): { path: string; query: Record<string, string> } | undefined {
  const link = reply.headers.link;
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  if (!match) throw new Error(`not a Link rel="next": ${String(link)}`);
  const target = new URL(match[1]!, 'http://rowi.invalid');
  return { path: target.pathname, query: Object.fromEntries(target.searchParams) };
}

describe('GET /v1/weather', () => {
  it('GET /v1/weather: 200 with places in the Weather shape, sorted by place, when filtered by name; no Link on the only page', async () => {
    const name = newName();
    const stem = newPlace('list');
    const c = await recordObservation(`${stem}-c`, { name });
    const a = await recordObservation(`${stem}-a`, { name, observed_at: '2025-06-01T13:00:00Z' });
    const b = await test.call({
      method: 'PATCH',
      url: `/v1/weather/${stem}-b`,
      body: { name, latitude: 1, longitude: 2 },
    });
    await recordObservation(newPlace('list'), { name: newName() });

    const reply = await test.call({ url: `/v1/weather?name=${encodeURIComponent(name)}` });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual({ data: [a.json, b.json, c.json], next_cursor: null });
    expect(reply.json.data[1]).toMatchObject({
      temperature_c: null,
      humidity_pct: null,
      wind_kph: null,
      conditions: null,
      observed_at: null,
      source: null,
      stale: false,
    });
    expect(reply.headers.link).toBeUndefined();
    expect(reply.headers['cache-control']).toBe('private, no-cache');
    expect(reply.headers.age).toBe('0');
  });

  it('GET /v1/weather: pages of `limit` with next_cursor and Link rel="next" keeping the filter; following them visits every place once, in order', async () => {
    const name = newName();
    const stem = newPlace('paged');
    const slugs = ['e', 'b', 'd', 'a', 'c'].map((letter) => `${stem}-${letter}`);
    for (const slug of slugs) await recordObservation(slug, { name });
    const firstUrl = `/v1/weather?name=${encodeURIComponent(name)}&limit=2`;

    const pages = await allPages(firstUrl);

    expect(pages.map((page) => page.json.data.map((place: { place: string }) => place.place))).toEqual([
      [`${stem}-a`, `${stem}-b`],
      [`${stem}-c`, `${stem}-d`],
      [`${stem}-e`],
    ]);
    for (const page of pages.slice(0, -1)) {
      expect(page.json.next_cursor).toEqual(expect.any(String));
      expect(nextLink(page)).toEqual({
        path: '/v1/weather',
        query: { name, limit: '2', cursor: page.json.next_cursor },
      });
    }
    expect(pages.at(-1)!.json.next_cursor).toBeNull();
    expect(nextLink(pages.at(-1)!)).toBeUndefined();
  });

  it('GET /v1/weather: a place created between pages before the cursor is not shown, one after it is (keyset paging is stable under inserts)', async () => {
    const name = newName();
    const stem = newPlace('stable');
    for (const letter of ['b', 'c', 'd']) await recordObservation(`${stem}-${letter}`, { name });
    const firstUrl = `/v1/weather?name=${encodeURIComponent(name)}&limit=2`;
    const first = await test.call({ url: firstUrl });

    await recordObservation(`${stem}-a`, { name });
    await recordObservation(`${stem}-e`, { name });
    const second = await test.call({ url: `${firstUrl}&cursor=${first.json.next_cursor}` });

    expect(first.json.data.map((place: { place: string }) => place.place)).toEqual([`${stem}-b`, `${stem}-c`]);
    expect(second.json.data.map((place: { place: string }) => place.place)).toEqual([`${stem}-d`, `${stem}-e`]);
  });

  it.each([
    ['-place', ['c', 'b', 'a']],
    ['id', ['b', 'c', 'a']],
    ['-created_at', ['a', 'c', 'b']],
    ['updated_at', ['b', 'c', 'a']],
  ])('GET /v1/weather: 200 in the order asked when sort=%s', async (sort, letters) => {
    const name = newName();
    const stem = newPlace('sorted');
    for (const letter of ['b', 'c', 'a']) {
      await recordObservation(`${stem}-${letter}`, { name });
      await new Promise((resolve) => setTimeout(resolve, 3));
    }

    const reply = await test.call({ url: `/v1/weather?name=${encodeURIComponent(name)}&sort=${sort}` });

    expect(reply.status).toBe(200);
    expect(reply.json.data.map((place: { place: string }) => place.place)).toEqual(
      letters.map((letter) => `${stem}-${letter}`),
    );
  });

  it('GET /v1/weather: 200 with only the places created strictly after created_after / before created_before', async () => {
    const name = newName();
    const early = await recordObservation(newPlace('early'), { name });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const late = await recordObservation(newPlace('late'), { name });
    const query = `/v1/weather?name=${encodeURIComponent(name)}`;

    const after = await test.call({ url: `${query}&created_after=${early.json.created_at}` });
    const before = await test.call({ url: `${query}&created_before=${late.json.created_at}` });
    const between = await test.call({
      url: `${query}&created_after=2000-01-01T00:00:00Z&created_before=2000-01-02T00:00:00%2B09:00`,
    });

    expect(after.json.data.map((place: { place: string }) => place.place)).toEqual([late.json.place]);
    expect(before.json.data.map((place: { place: string }) => place.place)).toEqual([early.json.place]);
    expect(between.json).toEqual({ data: [], next_cursor: null });
  });

  it('GET /v1/weather: 200 in XML when Accept asks for it', async () => {
    const name = newName();
    const place = newPlace('xml');
    await recordObservation(place, { name });

    const reply = await test.call({
      url: `/v1/weather?name=${encodeURIComponent(name)}`,
      headers: { accept: 'application/xml' },
    });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toMatch(
      new RegExp(
        `^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<places><data><weather><id>\\d+</id><place>${place}</place><name>${name}</name>.*</weather></data><next_cursor nil="true"/></places>$`,
      ),
    );
  });

  it.each([
    ['sort names a field places cannot be sorted by', 'sort=temperature_c', '#/sort'],
    ['limit is 0', 'limit=0', '#/limit'],
    ['limit is 501', 'limit=501', '#/limit'],
    ['limit is not a number', 'limit=ten', '#/limit'],
    ['the cursor was not issued by the API', 'cursor=not-a-cursor', '#/cursor'],
    ['the parameter is unknown', 'temperature_c=20', '#/temperature_c'],
    ['created_after is not RFC 3339', 'created_after=yesterday', '#/created_after'],
    ['name is longer than 200 characters', `name=${'n'.repeat(201)}`, '#/name'],
  ])('GET /v1/weather: 400 invalid-query when %s', async (_case, query, pointer) => {
    const reply = await test.call({ url: `/v1/weather?${query}` });

    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toEqual([pointer]);
  });

  it('GET /v1/weather: 400 invalid-query when a cursor issued for one sort is sent with another', async () => {
    const name = newName();
    for (let index = 0; index < 2; index++) await recordObservation(newPlace('cursor'), { name });
    const first = await test.call({ url: `/v1/weather?name=${encodeURIComponent(name)}&limit=1` });

    const reply = await test.call({
      url: `/v1/weather?name=${encodeURIComponent(name)}&limit=1&sort=-place&cursor=${first.json.next_cursor}`,
    });

    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/cursor']);
  });
});

describe('GET /v1/weather/{place}/observations', () => {
  it("GET /v1/weather/{place}/observations: 200 with the history newest first (whatever the order recorded), in the Observation shape, and no other place's", async () => {
    const place = newPlace('history');
    await placeWithHistory(place, ['2025-06-01T12:00:00Z', '2025-06-01T14:00:00Z', '2025-06-01T13:00:00Z']);
    await placeWithHistory(newPlace('other'), ['2025-06-01T12:30:00Z']);
    const stored = await storedObservations(place);

    const reply = await test.call({ url: `/v1/weather/${place}/observations` });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.headers.link).toBeUndefined();
    expect(reply.headers['cache-control']).toBe('private, no-cache');
    expect(reply.headers.age).toBe('0');
    expect(reply.json.next_cursor).toBeNull();
    expect(reply.json.data).toEqual(
      [...stored].reverse().map((row) => ({
        id: row.id,
        place,
        temperature_c: row.temperature_c,
        humidity_pct: 40,
        wind_kph: 12,
        conditions: 'partly-cloudy',
        observed_at: row.observed_at,
        source: 'admin',
        created_at: expect.stringMatching(TIMESTAMP),
        updated_at: expect.stringMatching(TIMESTAMP),
      })),
    );
    expect(
      reply.json.data.map((item: { observed_at: string; temperature_c: number }) => [
        item.observed_at,
        item.temperature_c,
      ]),
    ).toEqual([
      ['2025-06-01T14:00:00.000Z', 1],
      ['2025-06-01T13:00:00.000Z', 2],
      ['2025-06-01T12:00:00.000Z', 0],
    ]);
  });

  it('GET /v1/weather/{place}/observations: oldest first when sort=observed_at', async () => {
    const place = newPlace('history');
    await placeWithHistory(place, ['2025-06-01T12:00:00Z', '2025-06-01T14:00:00Z', '2025-06-01T13:00:00Z']);

    const reply = await test.call({ url: `/v1/weather/${place}/observations?sort=observed_at` });

    expect(reply.status).toBe(200);
    expect(reply.json.data.map((item: { observed_at: string }) => item.observed_at)).toEqual([
      '2025-06-01T12:00:00.000Z',
      '2025-06-01T13:00:00.000Z',
      '2025-06-01T14:00:00.000Z',
    ]);
  });

  it('GET /v1/weather/{place}/observations: the place is matched without regard to case, and items name it in lower case', async () => {
    const place = newPlace('casing');
    await placeWithHistory(place, ['2025-06-01T12:00:00Z']);

    const reply = await test.call({ url: `/v1/weather/${place.toUpperCase()}/observations` });

    expect(reply.status).toBe(200);
    expect(reply.json.data.map((item: { place: string }) => item.place)).toEqual([place]);
  });

  it('GET /v1/weather/{place}/observations: 200 with an empty page when the place has no observation yet', async () => {
    const place = newPlace('empty');
    await test.call({ method: 'PATCH', url: `/v1/weather/${place}`, body: {} });

    const reply = await test.call({ url: `/v1/weather/${place}/observations` });

    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ data: [], next_cursor: null });
  });

  it.each([
    ['observed_after (exclusive)', 'observed_after=2025-06-01T11:00:00Z', ['13', '12']],
    ['observed_before (exclusive)', 'observed_before=2025-06-01T12:00:00Z', ['11', '10']],
    ['both bounds', 'observed_after=2025-06-01T10:00:00Z&observed_before=2025-06-01T13:00:00Z', ['12', '11']],
    ['a bound with an offset (+09:00 = 11:00Z)', 'observed_after=2025-06-01T20:00:00%2B09:00', ['13', '12']],
    ['a bound with milliseconds between two observations', 'observed_before=2025-06-01T11:00:00.001Z', ['11', '10']],
    ['bounds that exclude everything', 'observed_after=2025-06-01T13:00:00Z', []],
    ['a bound and sort=observed_at', 'observed_after=2025-06-01T10:30:00Z&sort=observed_at', ['11', '12', '13']],
  ])(
    'GET /v1/weather/{place}/observations: only the observations inside the bounds when filtered by %s',
    async (_case, query, hours) => {
      const place = newPlace('bounded');
      await placeWithHistory(place, [
        '2025-06-01T10:00:00Z',
        '2025-06-01T11:00:00Z',
        '2025-06-01T12:00:00Z',
        '2025-06-01T13:00:00Z',
      ]);

      const reply = await test.call({ url: `/v1/weather/${place}/observations?${query}` });

      expect(reply.status).toBe(200);
      expect(reply.json.data.map((item: { observed_at: string }) => item.observed_at)).toEqual(
        hours.map((hour) => `2025-06-01T${hour}:00:00.000Z`),
      );
    },
  );

  it.each([
    ['newest first', {}, ['16', '15', '14', '13', '12']],
    ['oldest first', { sort: 'observed_at' }, ['12', '13', '14', '15', '16']],
    ['newest first inside bounds', { observed_before: '2025-06-01T16:00:00Z' }, ['15', '14', '13', '12']],
  ])(
    'GET /v1/weather/{place}/observations: pages of limit=2 with Link rel="next" visit the whole history once, %s',
    async (_case, extra, hours) => {
      const place = newPlace('paged');
      await placeWithHistory(place, [
        '2025-06-01T14:00:00Z',
        '2025-06-01T12:00:00Z',
        '2025-06-01T16:00:00Z',
        '2025-06-01T13:00:00Z',
        '2025-06-01T15:00:00Z',
      ]);
      const firstUrl = `/v1/weather/${place}/observations?${new URLSearchParams({ limit: '2', ...extra }).toString()}`;

      const pages = await allPages(firstUrl);

      expect(pages).toHaveLength(Math.ceil(hours.length / 2));
      expect(pages.flatMap((page) => page.json.data.map((item: { observed_at: string }) => item.observed_at))).toEqual(
        hours.map((hour) => `2025-06-01T${hour}:00:00.000Z`),
      );
      for (const page of pages.slice(0, -1)) {
        expect(nextLink(page)).toEqual({
          path: `/v1/weather/${place}/observations`,
          query: { limit: '2', ...extra, cursor: page.json.next_cursor },
        });
      }
      expect(pages.at(-1)!.headers.link).toBeUndefined();
    },
  );

  it('GET /v1/weather/{place}/observations: an observation recorded between pages, older than the cursor, shows on the next page (newest first)', async () => {
    const place = newPlace('stable');
    await placeWithHistory(place, ['2025-06-01T14:00:00Z', '2025-06-01T13:00:00Z', '2025-06-01T11:00:00Z']);
    const firstUrl = `/v1/weather/${place}/observations?limit=2`;
    const first = await test.call({ url: firstUrl });

    await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    await recordObservation(place, { observed_at: '2025-06-01T15:00:00Z' });
    const second = await test.call({ url: `${firstUrl}&cursor=${first.json.next_cursor}` });

    expect(first.json.data.map((item: { observed_at: string }) => item.observed_at)).toEqual([
      '2025-06-01T14:00:00.000Z',
      '2025-06-01T13:00:00.000Z',
    ]);
    expect(second.json.data.map((item: { observed_at: string }) => item.observed_at)).toEqual([
      '2025-06-01T12:00:00.000Z',
      '2025-06-01T11:00:00.000Z',
    ]);
  });

  it('GET /v1/weather/{place}/observations: a corrected observation shows its new values, its first created_at and a later updated_at', async () => {
    const place = newPlace('corrected');
    await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z', temperature_c: 10 });
    const [original] = (await test.call({ url: `/v1/weather/${place}/observations` })).json.data;
    await new Promise((resolve) => setTimeout(resolve, 3));
    await recordObservation(place, { observed_at: '2025-06-01T12:00:00.000+00:00', temperature_c: 11 });

    const reply = await test.call({ url: `/v1/weather/${place}/observations` });

    expect(reply.json.data).toEqual([{ ...original, temperature_c: 11, updated_at: expect.stringMatching(TIMESTAMP) }]);
    expect(reply.json.data[0].updated_at > original.created_at).toBe(true);
  });

  it('GET /v1/weather/{place}/observations: 200 in XML when Accept asks for it', async () => {
    const place = newPlace('xml');
    await placeWithHistory(place, ['2025-06-01T12:00:00Z']);

    const reply = await test.call({ url: `/v1/weather/${place}/observations`, headers: { accept: 'application/xml' } });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toMatch(
      new RegExp(
        `^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<observations><data><observation><id>\\d+</id><place>${place}</place><temperature_c>0</temperature_c>.*<observed_at>2025-06-01T12:00:00.000Z</observed_at>.*</observation></data><next_cursor nil="true"/></observations>$`,
      ),
    );
  });

  it('GET /v1/weather/{place}/observations: 404 not-found when there is no such place', async () => {
    const reply = await test.call({ url: `/v1/weather/${newPlace('nowhere')}/observations` });

    expectProblem(reply, 404, 'not-found');
  });

  it.each([
    ['observed_after is "yesterday"', 'observed_after=yesterday', '#/observed_after'],
    ['observed_before has month 13', 'observed_before=2026-13-01T00:00:00Z', '#/observed_before'],
    ['observed_after has no time zone', 'observed_after=2025-06-01T12:00:00', '#/observed_after'],
    ['sort names a field history cannot be sorted by', 'sort=temperature_c', '#/sort'],
    ['limit is 0', 'limit=0', '#/limit'],
    ['limit is 501', 'limit=501', '#/limit'],
    ['the cursor was not issued by the API', 'cursor=WyJ4Il0.bad', '#/cursor'],
    [
      'created_after is sent (history is filtered by observed_*)',
      'created_after=2025-06-01T12:00:00Z',
      '#/created_after',
    ],
  ])('GET /v1/weather/{place}/observations: 400 invalid-query when %s', async (_case, query, pointer) => {
    const place = newPlace('queried');
    await placeWithHistory(place, ['2025-06-01T12:00:00Z']);

    const reply = await test.call({ url: `/v1/weather/${place}/observations?${query}` });

    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors?.map((error) => error.pointer)).toEqual([pointer]);
  });
});

describe('PUT /v1/weather/{place}: concurrent writers', () => {
  it('PUT /v1/weather/{place}: concurrent first observations of a new place create it once (one 201), keep every observation, and end at the newest', async () => {
    const place = newPlace('race');
    const days = [3, 7, 1, 8, 5, 2, 6, 4];

    const replies = await Promise.all(
      days.map((day) =>
        test.call({
          method: 'PUT',
          url: `/v1/weather/${place}`,
          body: buildObservation({ observed_at: `2025-06-0${day}T00:00:00Z`, temperature_c: day }),
        }),
      ),
    );

    expect(replies.map((reply) => reply.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    const rows = await test.storage.db.selectFrom('places').select('place').where('place', '=', place).execute();
    expect(rows).toHaveLength(1);
    expect((await storedObservations(place)).map((row) => [row.observed_at, row.temperature_c])).toEqual(
      [...days].sort().map((day) => [`2025-06-0${day}T00:00:00.000Z`, day]),
    );
    expect(await storedPlace(place)).toMatchObject({ observed_at: '2025-06-08T00:00:00.000Z', temperature_c: 8 });
    const read = await test.call({ url: `/v1/weather/${place}` });
    expect(read.json).toMatchObject({ observed_at: '2025-06-08T00:00:00.000Z', temperature_c: 8 });
  });

  it('PUT /v1/weather/{place}: concurrent observations of one instant leave one history row, and the place shows the values of that row', async () => {
    const place = newPlace('same-instant');
    await recordObservation(place, { observed_at: '2025-06-01T00:00:00Z' });

    const replies = await Promise.all(
      [1, 2, 3, 4, 5].map((temperature) =>
        test.call({
          method: 'PUT',
          url: `/v1/weather/${place}`,
          body: buildObservation({ observed_at: '2025-06-02T00:00:00Z', temperature_c: temperature }),
        }),
      ),
    );

    expect(replies.every((reply) => reply.status === 200)).toBe(true);
    const history = await storedObservations(place);
    expect(history).toHaveLength(2);
    const latest = history.at(-1)!;
    expect(latest.observed_at).toBe('2025-06-02T00:00:00.000Z');
    expect(await storedPlace(place)).toMatchObject({
      observed_at: latest.observed_at,
      temperature_c: latest.temperature_c,
    });
  });

  it('PUT /v1/weather/{place}: concurrent requests leave the version counting each change once (the ETag of the final state is the stored version)', async () => {
    const place = newPlace('versions');
    await recordObservation(place, { observed_at: '2025-06-01T00:00:00Z' });
    const before = await storedWeather();
    const start = before.places.find((row) => row.place === place)!.version;

    await Promise.all(
      [2, 3, 4, 5].map((day) =>
        test.call({
          method: 'PUT',
          url: `/v1/weather/${place}`,
          body: buildObservation({ observed_at: `2025-06-0${day}T00:00:00Z` }),
        }),
      ),
    );
    const read = await test.call({ url: `/v1/weather/${place}` });

    const stored = (await storedPlace(place))!;
    expect(stored.version).toBeGreaterThan(start);
    expect(stored.version).toBeLessThanOrEqual(start + 4);
    expect(read.headers.etag).toBe(`"v${stored.version}"`);
    expect(read.json.observed_at).toBe('2025-06-05T00:00:00.000Z');
  });
});
