import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createUser } from '../helpers/records.js';
import { buildObservation, weatherHelpers } from '../helpers/weather.js';

/**
 * Every timestamp a caller sends is one rowi can store, read back and serialise: RFC 3339 with an
 * offset, years 0001–9999 once in UTC, no leap second. Anything else is refused before it is
 * written (422 in a body, 400 in a query string). And a value already stored that breaks a rule
 * of its schema (written before the rule existed, or by hand) is presented as stored: it never
 * turns a read or a page into a 500.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const { newPlace, putObservation, recordObservation, storedWeather } = weatherHelpers(() => test);

const RANGE_RULE =
  'must be a valid RFC 3339 date-time with a time zone, from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z (no leap second)';

/** Instants rowi cannot store, each written as a caller might. */
const UNSTORABLE: [string, string][] = [
  ['year 0 (before UTC is applied: 0000-01-01T00:00:00+01:00 is year −1)', '0000-01-01T00:00:00+01:00'],
  ['year 0 in UTC', '0000-06-01T00:00:00Z'],
  ['year 1 that is year 0 in UTC', '0001-01-01T00:30:00+01:00'],
  ['a negative year', '-0001-01-01T00:00:00Z'],
  ['year 275760 (the end of JavaScript dates)', '+275760-09-13T00:00:00Z'],
  ['a six-digit year without sign', '275760-09-13T00:00:00Z'],
  ['year 9999 that is year 10000 in UTC', '9999-12-31T23:59:59-00:01'],
  ['a leap second', '2016-12-31T23:59:60Z'],
  ['an offset of +24:00', '2026-01-01T00:00:00+24:00'],
  ['an offset of -24:00', '2026-01-01T00:00:00-24:00'],
  ['no offset', '2026-01-01T00:00:00'],
  ['February 29 of a common year', '2025-02-29T00:00:00Z'],
];

describe('timestamps a caller sends', () => {
  it.each(UNSTORABLE)(
    'PUT /v1/weather/{place}: 422 naming observed_at, nothing stored, when observed_at is %s',
    async (_case, instant) => {
      const before = await storedWeather();
      const reply = await putObservation(newPlace('unstorable'), buildObservation({ observed_at: instant }));
      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/observed_at', detail: RANGE_RULE }]);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each(UNSTORABLE)(
    'POST /v1/callers/{id}/keys: 422 naming expires_at, no key stored, when expires_at is %s',
    async (_case, instant) => {
      const keysBefore = await test.storage.db.selectFrom('api_keys').selectAll().orderBy('id').execute();
      const reply = await test.call({ method: 'POST', url: '/v1/callers/1/keys', body: { expires_at: instant } });
      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: '#/expires_at', detail: RANGE_RULE }]);
      expect(await test.storage.db.selectFrom('api_keys').selectAll().orderBy('id').execute()).toEqual(keysBefore);
    },
  );

  it.each([
    ['/v1/users', 'created_after'],
    ['/v1/items', 'created_before'],
    ['/v1/orders', 'created_after'],
    ['/v1/callers', 'created_before'],
    ['/v1/weather', 'created_after'],
    ['/v1/audit-events', 'after'],
  ])('GET %s: 400 invalid-query naming %s when it is year 0 once in UTC', async (path, parameter) => {
    const reply = await test.call({ url: `${path}?${parameter}=${encodeURIComponent('0000-01-01T00:00:00+01:00')}` });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors).toEqual([{ in: 'query', pointer: `#/${parameter}`, detail: RANGE_RULE }]);
  });

  it('GET /v1/weather/{place}/observations: 400 invalid-query when observed_before is a leap second', async () => {
    const place = newPlace('history');
    await recordObservation(place);
    const reply = await test.call({ url: `/v1/weather/${place}/observations?observed_before=2016-12-31T23:59:60Z` });
    expectProblem(reply, 400, 'invalid-query');
  });

  it('PUT /v1/users/{id}: 422 naming created_at, nothing changed, when the echoed created_at is in year 0', async () => {
    const { user } = await createUser(test);
    const reply = await test.call({
      method: 'PUT',
      url: `/v1/users/${user.id}`,
      body: { name: 'Renamed', email: user.email, created_at: '0000-12-31T23:00:00+01:00' },
    });
    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer)).toEqual(['#/created_at']);
    expect((await test.call({ url: `/v1/users/${user.id}` })).json).toEqual(user);
  });

  it('PUT /v1/weather/{place}: 201, stored in UTC and read back, when observed_at is the first instant of year 1 written with an offset', async () => {
    const place = newPlace('earliest');
    const reply = await putObservation(place, buildObservation({ observed_at: '0001-01-01T01:00:00+01:00' }));
    expect(reply.status).toBe(201);
    expect(reply.json.observed_at).toBe('0001-01-01T00:00:00.000Z');
    expect((await test.call({ url: `/v1/weather/${place}` })).json.observed_at).toBe('0001-01-01T00:00:00.000Z');
    expect((await test.call({ url: `/v1/weather/${place}/observations` })).json.data[0].observed_at).toBe(
      '0001-01-01T00:00:00.000Z',
    );
  });

  it('POST /v1/callers/{id}/keys: 201, listed and read back, when expires_at is the last millisecond of year 9999', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/v1/callers/1/keys',
      body: { expires_at: '9999-12-31T23:59:59.999Z' },
    });
    expect(reply.status).toBe(201);
    expect(reply.json.expires_at).toBe('9999-12-31T23:59:59.999Z');
    expect((await test.call({ url: `/v1/callers/1/keys/${reply.json.id}` })).json.expires_at).toBe(
      '9999-12-31T23:59:59.999Z',
    );
    const listed = await test.call({ url: '/v1/callers/1/keys?limit=500' });
    expect(listed.status).toBe(200);
  });
});

describe('values already stored that break a rule of their schema', () => {
  it('GET /v1/weather, /v1/weather/{place} and its observations: 200, the stored values as stored, when a place holds a year-0 observation and a word the vocabulary lacks', async () => {
    const place = newPlace('stored-oddity');
    await recordObservation(place);
    const db = test.storage.db;
    // Written as an earlier rowi (or a hand-made fix) could have written them.
    await db
      .updateTable('places')
      .set({ observed_at: '-000001-12-31T23:00:00.000Z', conditions: 'volcanic-ash' })
      .where('place', '=', place)
      .execute();
    await db
      .updateTable('observations')
      .set({ observed_at: '-000001-12-31T23:00:00.000Z', conditions: 'volcanic-ash' })
      .execute();

    const read = await test.call({ url: `/v1/weather/${place}` });
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ place, observed_at: '-000001-12-31T23:00:00.000Z', conditions: 'volcanic-ash' });
    const list = await test.call({ url: '/v1/weather?limit=500' });
    expect(list.status).toBe(200);
    expect(list.json.data.find((row: { place: string }) => row.place === place)).toMatchObject({
      observed_at: '-000001-12-31T23:00:00.000Z',
      conditions: 'volcanic-ash',
    });
    const history = await test.call({ url: `/v1/weather/${place}/observations` });
    expect(history.status).toBe(200);
    expect(history.json.data[0]).toMatchObject({
      observed_at: '-000001-12-31T23:00:00.000Z',
      conditions: 'volcanic-ash',
    });
    const xml = await test.call({ url: '/v1/weather?limit=500', headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(200);
    expect(xml.text).toContain('<conditions>volcanic-ash</conditions>');
  });

  it('GET /v1/callers/{id}/keys and one key: 200 with the stored expires_at when it is a six-digit year', async () => {
    const created = await test.call({ method: 'POST', url: '/v1/callers/1/keys', body: {} });
    await test.storage.db
      .updateTable('api_keys')
      .set({ expires_at: '+010000-01-01T00:00:00.000Z' })
      .where('id', '=', created.json.id)
      .execute();
    const one = await test.call({ url: `/v1/callers/1/keys/${created.json.id}` });
    expect(one.status).toBe(200);
    expect(one.json.expires_at).toBe('+010000-01-01T00:00:00.000Z');
    const list = await test.call({ url: '/v1/callers/1/keys?limit=500' });
    expect(list.status).toBe(200);
    expect(list.json.data.map((key: { id: number }) => key.id)).toContain(created.json.id);
  });
});
