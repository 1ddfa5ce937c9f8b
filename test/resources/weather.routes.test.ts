import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerWithKey } from '../helpers/records.js';
import { buildObservation, DOCUMENTED_CONDITIONS, weatherHelpers } from '../helpers/weather.js';

let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const { newPlace, putObservation, recordObservation, patchPlace, storedPlace, storedObservations, storedWeather } =
  weatherHelpers(() => test);

describe('PUT /v1/weather/{place}', () => {
  it('PUT /v1/weather/{place}: 201 with Location and the place with its weather when the place is new; the place and one observation are stored', async () => {
    const place = newPlace('lisbon');

    const reply = await putObservation(place, buildObservation());

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.headers.location).toBe(`/v1/weather/${place}`);
    expect(reply.json).toEqual({
      id: expect.any(Number),
      place,
      name: place,
      latitude: null,
      longitude: null,
      temperature_c: 21.5,
      humidity_pct: 40,
      wind_kph: 12,
      conditions: 'partly-cloudy',
      observed_at: '2025-06-01T12:00:00.000Z',
      source: 'admin',
      stale: false,
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    const stored = await storedPlace(place);
    expect(stored).toMatchObject({
      id: reply.json.id,
      place,
      name: place,
      temperature_c: 21.5,
      humidity_pct: 40,
      wind_kph: 12,
      conditions: 'partly-cloudy',
      observed_at: '2025-06-01T12:00:00.000Z',
      source: 'admin',
    });
    expect(reply.headers.etag).toBe(`"v${stored!.version}"`);
    expect(await storedObservations(place)).toEqual([
      {
        id: expect.anything(),
        place_id: stored!.id,
        temperature_c: 21.5,
        humidity_pct: 40,
        wind_kph: 12,
        conditions: 'partly-cloudy',
        observed_at: '2025-06-01T12:00:00.000Z',
        source: 'admin',
        created_at: expect.stringMatching(TIMESTAMP),
        updated_at: expect.stringMatching(TIMESTAMP),
      },
    ]);
  });

  it('PUT /v1/weather/{place}: a new place starts at version 1 (ETag "v1", updated_at = created_at), as every new record does', async () => {
    const place = newPlace();

    const reply = await putObservation(place, buildObservation());

    expect(reply.status).toBe(201);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json.updated_at).toBe(reply.json.created_at);
    expect(await storedPlace(place)).toMatchObject({ version: 1, updated_at: reply.json.created_at });
  });

  it('PUT /v1/weather/{place}: 200, the next version and the newer weather when a newer observation arrives; the history holds both', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    const before = await storedPlace(place);

    const reply = await putObservation(
      place,
      buildObservation({
        observed_at: '2025-06-01T13:00:00Z',
        temperature_c: 23,
        humidity_pct: 35,
        wind_kph: 5,
        conditions: 'clear',
      }),
    );

    expect(reply.status).toBe(200);
    expect(reply.headers.location).toBeUndefined();
    expect(reply.headers.etag).toBe(`"v${before!.version + 1}"`);
    expect(reply.json).toEqual({
      ...first.json,
      temperature_c: 23,
      humidity_pct: 35,
      wind_kph: 5,
      conditions: 'clear',
      observed_at: '2025-06-01T13:00:00.000Z',
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    expect(reply.json.updated_at > first.json.updated_at).toBe(true);
    expect(await storedPlace(place)).toMatchObject({
      version: before!.version + 1,
      temperature_c: 23,
      conditions: 'clear',
      observed_at: '2025-06-01T13:00:00.000Z',
    });
    const history = await storedObservations(place);
    expect(history.map((row) => [row.observed_at, row.temperature_c])).toEqual([
      ['2025-06-01T12:00:00.000Z', 21.5],
      ['2025-06-01T13:00:00.000Z', 23],
    ]);
  });

  it('PUT /v1/weather/{place}: 200 still showing the newer weather, version unchanged, when an older observation arrives late; it joins the history', async () => {
    const place = newPlace();
    const newer = await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z', temperature_c: 23 });
    const before = await storedPlace(place);

    const reply = await putObservation(
      place,
      buildObservation({ observed_at: '2025-06-01T11:00:00Z', temperature_c: 18 }),
    );

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(newer.headers.etag);
    expect(reply.json).toEqual(newer.json);
    expect(await storedPlace(place)).toEqual(before);
    const history = await storedObservations(place);
    expect(history.map((row) => [row.observed_at, row.temperature_c])).toEqual([
      ['2025-06-01T11:00:00.000Z', 18],
      ['2025-06-01T13:00:00.000Z', 23],
    ]);
  });

  it('PUT /v1/weather/{place}: 200 correcting the observation when the same observed_at comes again (written with an offset); one history row for that instant, its values replaced', async () => {
    const place = newPlace();
    await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z', temperature_c: 21.5, conditions: 'rain' });
    const [original] = await storedObservations(place);
    const before = await storedPlace(place);

    const reply = await putObservation(
      place,
      buildObservation({
        observed_at: '2025-06-01T21:00:00+09:00',
        temperature_c: 20.5,
        conditions: 'drizzle',
        source: 'corrected-feed',
      }),
    );

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(`"v${before!.version + 1}"`);
    expect(reply.json).toMatchObject({
      temperature_c: 20.5,
      conditions: 'drizzle',
      observed_at: '2025-06-01T12:00:00.000Z',
      source: 'corrected-feed',
    });
    const history = await storedObservations(place);
    expect(history).toEqual([
      {
        ...original,
        temperature_c: 20.5,
        conditions: 'drizzle',
        source: 'corrected-feed',
        updated_at: expect.stringMatching(TIMESTAMP),
      },
    ]);
    expect(history[0]!.updated_at >= original!.created_at).toBe(true);
  });

  it('PUT /v1/weather/{place}: 200 and nothing changes (same version) when the very same observation is sent again', async () => {
    const place = newPlace();
    const first = await recordObservation(place);
    const before = await storedPlace(place);

    const reply = await putObservation(place, buildObservation());

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(first.headers.etag);
    expect(reply.json).toEqual(first.json);
    expect(await storedPlace(place)).toEqual(before);
    expect(await storedObservations(place)).toHaveLength(1);
  });

  it('PUT /v1/weather/{place}: 200 correcting an older observation does not touch the latest weather', async () => {
    const place = newPlace();
    await recordObservation(place, { observed_at: '2025-06-01T11:00:00Z', temperature_c: 18 });
    const latest = await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z', temperature_c: 23 });

    const reply = await putObservation(
      place,
      buildObservation({ observed_at: '2025-06-01T11:00:00Z', temperature_c: 17 }),
    );

    expect(reply.status).toBe(200);
    expect(reply.json).toEqual(latest.json);
    expect((await storedObservations(place)).map((row) => [row.observed_at, row.temperature_c])).toEqual([
      ['2025-06-01T11:00:00.000Z', 17],
      ['2025-06-01T13:00:00.000Z', 23],
    ]);
  });

  it.each([
    ['an offset of +09:00', '2025-06-02T09:30:00+09:00', '2025-06-02T00:30:00.000Z'],
    ['an offset of -05:30', '2025-06-01T19:00:00-05:30', '2025-06-02T00:30:00.000Z'],
    ['no fraction and Z', '2025-06-02T00:30:00Z', '2025-06-02T00:30:00.000Z'],
    ['a tenth of a second', '2025-06-02T00:30:00.5Z', '2025-06-02T00:30:00.500Z'],
    ['microseconds (cut to milliseconds)', '2025-06-02T02:30:00.123456+02:00', '2025-06-02T00:30:00.123Z'],
    ['lower-case t and z', '2025-06-02t00:30:00z', '2025-06-02T00:30:00.000Z'],
  ])(
    'PUT /v1/weather/{place}: observed_at written with %s is stored and shown in UTC with milliseconds',
    async (_case, observedAt, stored) => {
      const place = newPlace();

      const reply = await putObservation(place, buildObservation({ observed_at: observedAt }));

      expect(reply.status).toBe(201);
      expect(reply.json.observed_at).toBe(stored);
      expect((await storedPlace(place))?.observed_at).toBe(stored);
      expect((await storedObservations(place)).map((row) => row.observed_at)).toEqual([stored]);
    },
  );

  it('PUT /v1/weather/{place}: the place is matched without regard to case (stored lower-case, read and written in any case)', async () => {
    const place = newPlace('tokyo');
    const mixed = place.replace('tokyo', 'Tokyo');

    const created = await putObservation(mixed, buildObservation({ observed_at: '2025-06-01T12:00:00Z' }));
    const again = await putObservation(place.toUpperCase(), buildObservation({ observed_at: '2025-06-01T13:00:00Z' }));
    const read = await test.call({ url: `/v1/weather/${place.toUpperCase()}` });

    expect(created.status).toBe(201);
    expect(created.headers.location).toBe(`/v1/weather/${place}`);
    expect(created.json.place).toBe(place);
    expect(again.status).toBe(200);
    expect(read.status).toBe(200);
    expect(read.json).toEqual(again.json);
    const rows = await test.storage.db
      .selectFrom('places')
      .select('place')
      .where('place', 'in', [place, mixed, place.toUpperCase()])
      .execute();
    expect(rows).toEqual([{ place }]);
    expect(await storedObservations(place)).toHaveLength(2);
  });

  it('PUT /v1/weather/{place}: 201 storing name, latitude and longitude when the body gives them; a later PUT without them keeps them', async () => {
    const place = newPlace();

    const created = await putObservation(
      place,
      buildObservation({ name: 'São Paulo', latitude: -23.55, longitude: -46.63, observed_at: '2025-06-01T12:00:00Z' }),
    );
    const later = await putObservation(place, buildObservation({ observed_at: '2025-06-01T13:00:00Z' }));

    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ name: 'São Paulo', latitude: -23.55, longitude: -46.63 });
    expect(later.status).toBe(200);
    expect(later.json).toMatchObject({
      name: 'São Paulo',
      latitude: -23.55,
      longitude: -46.63,
      observed_at: '2025-06-01T13:00:00.000Z',
    });
    expect(await storedPlace(place)).toMatchObject({ name: 'São Paulo', latitude: -23.55, longitude: -46.63 });
  });

  it('PUT /v1/weather/{place}: 200 changing name and coordinates of an existing place together with an older observation (the latest weather stays)', async () => {
    const place = newPlace();
    const latest = await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z' });
    const before = await storedPlace(place);

    const reply = await putObservation(
      place,
      buildObservation({ observed_at: '2025-06-01T11:00:00Z', name: 'Renamed', latitude: 1.5, longitude: 2.5 }),
    );

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(`"v${before!.version + 1}"`);
    expect(reply.json).toEqual({
      ...latest.json,
      name: 'Renamed',
      latitude: 1.5,
      longitude: 2.5,
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    expect(await storedObservations(place)).toHaveLength(2);
  });

  it("PUT /v1/weather/{place}: source is the caller's name when the body names none, and the body's source when it does", async () => {
    const { caller, key } = await createCallerWithKey(test, { role: 'editor', name: 'met-feed' });
    const place = newPlace();

    const byCaller = await test.call({
      method: 'PUT',
      url: `/v1/weather/${place}`,
      key,
      body: buildObservation({ observed_at: '2025-06-01T12:00:00Z' }),
    });
    const named = await test.call({
      method: 'PUT',
      url: `/v1/weather/${place}`,
      key,
      body: buildObservation({ observed_at: '2025-06-01T13:00:00Z', source: 'station-42' }),
    });

    expect(caller.name).toBe('met-feed');
    expect(byCaller.json.source).toBe('met-feed');
    expect(named.json.source).toBe('station-42');
    expect((await storedObservations(place)).map((row) => row.source)).toEqual(['met-feed', 'station-42']);
    expect((await storedPlace(place))?.source).toBe('station-42');
  });

  it.each([
    ['the highest temperature (70)', { temperature_c: 70 }],
    ['the lowest temperature (-100)', { temperature_c: -100 }],
    ['humidity 0 and no wind', { humidity_pct: 0, wind_kph: 0 }],
    ['humidity 100 and a fraction of a degree', { humidity_pct: 100, temperature_c: -0.25 }],
    ['a strong wind', { wind_kph: 408 }],
    ['observed_at 4 minutes ahead of the clock', { observed_at: new Date(Date.now() + 4 * 60_000).toISOString() }],
    ['a source of 64 characters', { source: 's'.repeat(64) }],
  ])('PUT /v1/weather/{place}: 201 when the body has %s', async (_case, overrides) => {
    const place = newPlace();
    const body = buildObservation(overrides);

    const reply = await putObservation(place, body);

    expect(reply.status).toBe(201);
    expect(reply.json).toMatchObject({ ...overrides, observed_at: new Date(body.observed_at).toISOString() });
    expect(await storedObservations(place)).toHaveLength(1);
  });

  it.each(DOCUMENTED_CONDITIONS)('PUT /v1/weather/{place}: 201 when conditions is %s', async (conditions) => {
    const place = newPlace();

    const reply = await putObservation(place, buildObservation({ conditions }));

    expect(reply.status).toBe(201);
    expect(reply.json.conditions).toBe(conditions);
    expect((await storedPlace(place))?.conditions).toBe(conditions);
  });

  it('PUT /v1/weather/{place}: 201 when the place has 64 characters (the longest slug) of letters, digits and hyphens', async () => {
    const place = `${newPlace('x')}-`.padEnd(64, '0');

    const reply = await putObservation(place, buildObservation());

    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/weather/${place}`);
    expect((await storedPlace(place))?.place).toBe(place);
  });

  it('PUT /v1/weather/{place}: 201 when the body is XML, answered in XML when Accept asks for it', async () => {
    const place = newPlace();

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/weather/${place}`,
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
      body:
        '<?xml version="1.0"?><weather><temperature_c>-3.5</temperature_c><humidity_pct>88</humidity_pct><wind_kph>20</wind_kph><conditions>snow</conditions>' +
        '<observed_at>2025-01-10T06:00:00+01:00</observed_at><name>Ny-&amp;-Ålesund</name><source>xml-feed</source></weather>',
    });

    expect(reply.status).toBe(201);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.location).toBe(`/v1/weather/${place}`);
    const stored = await storedPlace(place);
    expect(reply.headers.etag).toBe(`"v${stored!.version}-xml"`);
    expect(reply.text).toMatch(
      new RegExp(
        `^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<weather><id>${stored!.id}</id><place>${place}</place><name>Ny-&amp;-Ålesund</name><latitude nil="true"/><longitude nil="true"/>` +
          '<temperature_c>-3.5</temperature_c><humidity_pct>88</humidity_pct><wind_kph>20</wind_kph><conditions>snow</conditions><observed_at>2025-01-10T05:00:00.000Z</observed_at>' +
          '<source>xml-feed</source><stale>false</stale><created_at>[^<]+</created_at><updated_at>[^<]+</updated_at></weather>$',
      ),
    );
    expect(stored).toMatchObject({
      name: 'Ny-&-Ålesund',
      temperature_c: -3.5,
      humidity_pct: 88,
      wind_kph: 20,
      conditions: 'snow',
      observed_at: '2025-01-10T05:00:00.000Z',
      source: 'xml-feed',
    });
  });

  it('PUT /v1/weather/{place}: 200 when the body echoes place (in any case), id and created_at as stored', async () => {
    const place = newPlace();
    const first = await recordObservation(place);

    const reply = await putObservation(
      place,
      buildObservation({
        observed_at: '2025-06-01T13:00:00Z',
        place: place.toUpperCase(),
        id: first.json.id,
        created_at: first.json.created_at,
      }),
    );

    expect(reply.status).toBe(200);
    expect(reply.json.observed_at).toBe('2025-06-01T13:00:00.000Z');
  });
});

describe('PUT /v1/weather/{place}: conditional requests', () => {
  it('PUT /v1/weather/{place}: 200 when If-Match holds the current ETag of either representation', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    const xmlTag = String(first.headers.etag).replace(/"$/, '-xml"');

    const json = await putObservation(place, buildObservation({ observed_at: '2025-06-01T13:00:00Z' }), {
      'if-match': String(first.headers.etag),
    });
    const xml = await putObservation(place, buildObservation({ observed_at: '2025-06-01T14:00:00Z' }), {
      'if-match': String(json.headers.etag).replace(/"$/, '-xml"'),
    });

    expect(xmlTag).toMatch(/^"v\d+-xml"$/);
    expect(json.status).toBe(200);
    expect(xml.status).toBe(200);
    expect(await storedObservations(place)).toHaveLength(3);
  });

  it('PUT /v1/weather/{place}: 412 precondition-failed when If-Match is stale, and nothing stored changes', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z' });
    const before = await storedWeather();

    const reply = await putObservation(place, buildObservation({ observed_at: '2025-06-01T14:00:00Z' }), {
      'if-match': String(first.headers.etag),
    });

    const problem = expectProblem(reply, 412, 'precondition-failed');
    expect(problem.detail).toContain(place);
    expect(await storedWeather()).toEqual(before);
  });

  it('PUT /v1/weather/{place}: 412 precondition-failed when If-Match is sent for a place that does not exist yet, and nothing is stored', async () => {
    const place = newPlace();
    const before = await storedWeather();

    const reply = await putObservation(place, buildObservation(), { 'if-match': '"v1"' });

    const problem = expectProblem(reply, 412, 'precondition-failed');
    expect(problem.detail).toContain('does not exist');
    expect(await storedWeather()).toEqual(before);
  });

  it('PUT /v1/weather/{place}: If-Match: * lets the write through when the place exists, and is 412 when it does not (nothing created)', async () => {
    const place = newPlace();
    await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    const absent = newPlace();

    const existing = await putObservation(place, buildObservation({ observed_at: '2025-06-01T13:00:00Z' }), {
      'if-match': '*',
    });
    const before = await storedWeather();
    const missing = await putObservation(absent, buildObservation(), { 'if-match': '*' });

    expect(existing.status).toBe(200);
    expectProblem(missing, 412, 'precondition-failed');
    expect(await storedWeather()).toEqual(before);
  });

  it('PUT /v1/weather/{place}: 412 when If-Match holds a weak tag (If-Match compares strongly), and nothing stored changes', async () => {
    const place = newPlace();
    const first = await recordObservation(place);
    const before = await storedWeather();

    const reply = await putObservation(place, buildObservation({ observed_at: '2025-06-01T13:00:00Z' }), {
      'if-match': `W/${String(first.headers.etag)}`,
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedWeather()).toEqual(before);
  });
});

describe('GET /v1/weather/{place}', () => {
  it('GET /v1/weather/{place}: 200 with the latest recorded weather, Cache-Control private, no-cache, Age 0 and a strong ETag', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place, { name: 'Reykjavík', latitude: 64.15, longitude: -21.94 });

    const reply = await test.call({ url: `/v1/weather/${place}` });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toEqual(recorded.json);
    expect(reply.headers['cache-control']).toBe('private, no-cache');
    expect(reply.headers.age).toBe('0');
    expect(reply.headers.etag).toBe(`"v${(await storedPlace(place))!.version}"`);
    expect(reply.headers.etag).toBe(recorded.headers.etag);
    expect(reply.headers.vary).toBe('Accept');
  });

  it('GET /v1/weather/{place}: 304 without a body, with the ETag and cache headers, when If-None-Match holds the current ETag', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place);

    const reply = await test.call({
      url: `/v1/weather/${place}`,
      headers: { 'if-none-match': `"v999", ${String(recorded.headers.etag)}` },
    });

    expect(reply.status).toBe(304);
    expect(reply.text).toBe('');
    expect(reply.headers.etag).toBe(recorded.headers.etag);
    expect(reply.headers['cache-control']).toBe('private, no-cache');
    expect(reply.headers.age).toBe('0');
  });

  it('GET /v1/weather/{place}: 304 when If-None-Match is * or holds the current tag as a weak one (If-None-Match compares weakly)', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place);

    const star = await test.call({ url: `/v1/weather/${place}`, headers: { 'if-none-match': '*' } });
    const weak = await test.call({
      url: `/v1/weather/${place}`,
      headers: { 'if-none-match': `W/${String(recorded.headers.etag)}` },
    });

    expect(star.status).toBe(304);
    expect(weak.status).toBe(304);
  });

  it('GET /v1/weather/{place}: 200 with the new ETag when If-None-Match holds the ETag from before a newer observation', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    const second = await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z', temperature_c: 30 });

    const reply = await test.call({
      url: `/v1/weather/${place}`,
      headers: { 'if-none-match': String(first.headers.etag) },
    });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(second.headers.etag);
    expect(reply.json.temperature_c).toBe(30);
  });

  it('GET /v1/weather/{place}: XML has its own ETag ("v<n>-xml"), nil measurements before the first observation, and 304 on its own tag', async () => {
    const place = newPlace();
    await patchPlace(place, { name: 'Empty' });

    const reply = await test.call({ url: `/v1/weather/${place}`, headers: { accept: 'application/xml' } });
    const cached = await test.call({
      url: `/v1/weather/${place}`,
      headers: { accept: 'application/xml', 'if-none-match': '"v1-xml"' },
    });
    const otherRepresentation = await test.call({
      url: `/v1/weather/${place}`,
      headers: { 'if-none-match': '"v1-xml"' },
    });

    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.headers.etag).toBe('"v1-xml"');
    expect(reply.text).toMatch(
      new RegExp(
        `<weather><id>\\d+</id><place>${place}</place><name>Empty</name><latitude nil="true"/><longitude nil="true"/><temperature_c nil="true"/><humidity_pct nil="true"/>` +
          '<wind_kph nil="true"/><conditions nil="true"/><observed_at nil="true"/><source nil="true"/><stale>false</stale>',
      ),
    );
    expect(cached.status).toBe(304);
    expect(otherRepresentation.status).toBe(200);
  });

  it('HEAD /v1/weather/{place}: 200 with the headers of GET and no body', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place);

    const reply = await test.call({ method: 'HEAD', url: `/v1/weather/${place}` });

    expect(reply.status).toBe(200);
    expect(reply.text).toBe('');
    expect(reply.headers.etag).toBe(recorded.headers.etag);
    expect(reply.headers['cache-control']).toBe('private, no-cache');
  });

  it('GET /v1/weather/{place}: 404 not-found naming the place when no place has that slug', async () => {
    const place = newPlace('nowhere');

    const reply = await test.call({ url: `/v1/weather/${place.toUpperCase()}` });

    const problem = expectProblem(reply, 404, 'not-found');
    expect(problem.detail).toContain(place);
    expect(problem.instance).toBe(`/v1/weather/${place.toUpperCase()}`);
  });
});

describe('PATCH /v1/weather/{place}', () => {
  it('PATCH /v1/weather/{place}: 201 with Location and ETag "v1" creating the place, without weather yet, when there is none', async () => {
    const place = newPlace();

    const reply = await patchPlace(place, { name: 'Ōsaka', latitude: 34.69, longitude: 135.5 });

    expect(reply.status).toBe(201);
    expect(reply.headers.location).toBe(`/v1/weather/${place}`);
    expect(reply.headers.etag).toBe('"v1"');
    expect(reply.json).toEqual({
      id: expect.any(Number),
      place,
      name: 'Ōsaka',
      latitude: 34.69,
      longitude: 135.5,
      temperature_c: null,
      humidity_pct: null,
      wind_kph: null,
      conditions: null,
      observed_at: null,
      source: null,
      stale: false,
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: reply.json.created_at,
    });
    expect(await storedPlace(place)).toMatchObject({
      name: 'Ōsaka',
      latitude: 34.69,
      longitude: 135.5,
      version: 1,
      observed_at: null,
    });
    expect(await storedObservations(place)).toEqual([]);
  });

  it('PATCH /v1/weather/{place}: 201 with the slug as name when an empty patch creates the place', async () => {
    const place = newPlace();

    const reply = await patchPlace(place, {});

    expect(reply.status).toBe(201);
    expect(reply.json).toMatchObject({ place, name: place, latitude: null, longitude: null });
  });

  it('PATCH /v1/weather/{place}: 200 changing only the members present; the weather and coordinates stay', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place, { latitude: 10, longitude: 20 });
    const before = await storedPlace(place);

    const reply = await patchPlace(place, { name: 'New name' });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe(`"v${before!.version + 1}"`);
    expect(reply.json).toEqual({ ...recorded.json, name: 'New name', updated_at: expect.stringMatching(TIMESTAMP) });
    expect(await storedPlace(place)).toEqual({
      ...before,
      name: 'New name',
      version: before!.version + 1,
      updated_at: reply.json.updated_at,
    });
  });

  it('PATCH /v1/weather/{place}: 200 clearing the coordinates when both are null', async () => {
    const place = newPlace();
    await patchPlace(place, { latitude: 48.86, longitude: 2.35 });

    const reply = await patchPlace(place, { latitude: null, longitude: null });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
    expect(reply.json).toMatchObject({ latitude: null, longitude: null });
    expect(await storedPlace(place)).toMatchObject({ latitude: null, longitude: null, version: 2 });
  });

  it('PATCH /v1/weather/{place}: 200 with plain JSON and with XML bodies too', async () => {
    const place = newPlace();
    await patchPlace(place, {});

    const json = await test.call({ method: 'PATCH', url: `/v1/weather/${place}`, body: { name: 'From JSON' } });
    const xml = await test.call({
      method: 'PATCH',
      url: `/v1/weather/${place}`,
      headers: { 'content-type': 'application/xml' },
      body: '<weather><latitude>1.25</latitude><longitude>-2.5</longitude></weather>',
    });

    expect(json.status).toBe(200);
    expect(xml.status).toBe(200);
    expect(await storedPlace(place)).toMatchObject({ name: 'From JSON', latitude: 1.25, longitude: -2.5, version: 3 });
  });

  it.each([
    ['latitude alone creates a place', null, { latitude: 1 }, '#/latitude'],
    ['longitude alone is set on a place without coordinates', 'none', { longitude: 2 }, '#/longitude'],
    ['latitude alone is cleared on a place with coordinates', 'both', { latitude: null }, '#/latitude'],
    ['longitude is changed while latitude is cleared', 'both', { latitude: null, longitude: 5 }, '#/latitude'],
  ] as const)(
    'PATCH /v1/weather/{place}: 422 validation-failed when %s (both or neither), and nothing stored changes',
    async (_case, existing, patch, pointer) => {
      const place = newPlace();
      if (existing === 'none') await patchPlace(place, {});
      if (existing === 'both') await patchPlace(place, { latitude: 3, longitude: 4 });
      const before = await storedWeather();

      const reply = await patchPlace(place, patch);

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([
        { in: 'body', pointer, detail: 'latitude and longitude are set or cleared together' },
      ]);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each([
    ['latitude is 91', { latitude: 91, longitude: 0 }, '#/latitude'],
    ['longitude is -181', { latitude: 0, longitude: -181 }, '#/longitude'],
    ['name is null (it cannot be removed)', { name: null }, '#/name'],
    ['name is empty', { name: '' }, '#/name'],
    ['an unknown field is sent', { altitude: 5 }, '#/altitude'],
    ['a measurement is sent (PATCH is for the place, PUT for weather)', { temperature_c: 20 }, '#/temperature_c'],
  ])(
    'PATCH /v1/weather/{place}: 422 validation-failed when %s, and nothing stored changes',
    async (_case, patch, pointer) => {
      const place = newPlace();
      await patchPlace(place, { latitude: 3, longitude: 4 });
      const before = await storedWeather();

      const reply = await patchPlace(place, patch);

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors?.map((error) => error.pointer)).toEqual([pointer]);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it('PATCH /v1/weather/{place}: 412 when If-Match is stale, and 412 when the place does not exist yet; nothing stored changes', async () => {
    const place = newPlace();
    await patchPlace(place, { name: 'One' });
    await patchPlace(place, { name: 'Two' });
    const absent = newPlace();
    const before = await storedWeather();

    const stale = await patchPlace(place, { name: 'Three' }, { 'if-match': '"v1"' });
    const notYet = await patchPlace(absent, { name: 'New' }, { 'if-match': '"v1"' });

    expectProblem(stale, 412, 'precondition-failed');
    expectProblem(notYet, 412, 'precondition-failed');
    expect(await storedWeather()).toEqual(before);
  });

  it('PATCH /v1/weather/{place}: 200 when If-Match holds the current ETag', async () => {
    const place = newPlace();
    const created = await patchPlace(place, { name: 'One' });

    const reply = await patchPlace(place, { name: 'Two' }, { 'if-match': String(created.headers.etag) });

    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBe('"v2"');
  });
});

describe('DELETE /v1/weather/{place}', () => {
  it('DELETE /v1/weather/{place}: 204, then the place is gone (404 on GET and on its history) and none of its observations are left', async () => {
    const place = newPlace();
    await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z' });
    const other = newPlace();
    await recordObservation(other);
    const { id } = (await storedPlace(place))!;
    const otherBefore = await storedObservations(other);

    const reply = await test.call({ method: 'DELETE', url: `/v1/weather/${place.toUpperCase()}` });

    expect(reply.status).toBe(204);
    expect(reply.text).toBe('');
    expectProblem(await test.call({ url: `/v1/weather/${place}` }), 404, 'not-found');
    expectProblem(await test.call({ url: `/v1/weather/${place}/observations` }), 404, 'not-found');
    expect(await storedPlace(place)).toBeUndefined();
    expect(await test.storage.db.selectFrom('observations').selectAll().where('place_id', '=', id).execute()).toEqual(
      [],
    );
    expect(await storedObservations(other)).toEqual(otherBefore);
  });

  it('DELETE /v1/weather/{place}: a PUT afterwards creates the place afresh (201, a new id, history of one)', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    await test.call({ method: 'DELETE', url: `/v1/weather/${place}` });

    const reply = await putObservation(place, buildObservation({ observed_at: '2025-06-01T10:00:00Z' }));

    expect(reply.status).toBe(201);
    expect(reply.json.id).not.toBe(first.json.id);
    expect(reply.json.observed_at).toBe('2025-06-01T10:00:00.000Z');
    expect(await storedObservations(place)).toHaveLength(1);
  });

  it('DELETE /v1/weather/{place}: 404 not-found when there is no such place', async () => {
    const reply = await test.call({ method: 'DELETE', url: `/v1/weather/${newPlace('nowhere')}` });

    expectProblem(reply, 404, 'not-found');
  });

  it('DELETE /v1/weather/{place}: 412 when If-Match is stale, and the place and its history stay', async () => {
    const place = newPlace();
    const first = await recordObservation(place, { observed_at: '2025-06-01T12:00:00Z' });
    await recordObservation(place, { observed_at: '2025-06-01T13:00:00Z' });
    const before = await storedWeather();

    const reply = await test.call({
      method: 'DELETE',
      url: `/v1/weather/${place}`,
      headers: { 'if-match': String(first.headers.etag) },
    });

    expectProblem(reply, 412, 'precondition-failed');
    expect(await storedWeather()).toEqual(before);
  });

  it('DELETE /v1/weather/{place}: 204 when If-Match holds the current ETag', async () => {
    const place = newPlace();
    const recorded = await recordObservation(place);

    const reply = await test.call({
      method: 'DELETE',
      url: `/v1/weather/${place}`,
      headers: { 'if-match': String(recorded.headers.etag) },
    });

    expect(reply.status).toBe(204);
    expect(await storedPlace(place)).toBeUndefined();
  });
});

describe('/v1/weather/{place}: methods and permissions', () => {
  it('POST /v1/weather/{place}: 405 method-not-allowed with Allow listing the methods of a place, and nothing stored changes', async () => {
    const place = newPlace();
    const before = await storedWeather();

    const reply = await test.call({ method: 'POST', url: `/v1/weather/${place}`, body: buildObservation() });

    const problem = expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe('GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
    expect(problem.allowed_methods).toEqual(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
    expect(await storedWeather()).toEqual(before);
  });

  it('POST /v1/weather: 405 method-not-allowed with Allow: GET, HEAD, OPTIONS (places are created by PUT or PATCH)', async () => {
    const reply = await test.call({ method: 'POST', url: '/v1/weather', body: buildObservation() });

    expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe('GET, HEAD, OPTIONS');
  });

  it('OPTIONS /v1/weather/{place}: 204 with Allow', async () => {
    const reply = await test.call({ method: 'OPTIONS', url: `/v1/weather/${newPlace()}` });

    expect(reply.status).toBe(204);
    expect(reply.headers.allow).toBe('GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  });

  it('PUT and PATCH /v1/weather/{place}: an editor may record observations and set coordinates', async () => {
    const { key } = await createCallerWithKey(test, { role: 'editor' });
    const place = newPlace();

    const put = await test.call({ method: 'PUT', url: `/v1/weather/${place}`, key, body: buildObservation() });
    const patch = await test.call({
      method: 'PATCH',
      url: `/v1/weather/${place}`,
      key,
      body: { latitude: 1, longitude: 2 },
    });

    expect(put.status).toBe(201);
    expect(patch.status).toBe(200);
    expect(await storedObservations(place)).toHaveLength(1);
  });

  it('DELETE /v1/weather/{place}: 403 insufficient-scope for an editor (weather:delete is admin only), and the place and its history stay', async () => {
    const { key } = await createCallerWithKey(test, { role: 'editor' });
    const place = newPlace();
    await recordObservation(place);
    const before = await storedWeather();

    const reply = await test.call({ method: 'DELETE', url: `/v1/weather/${place}`, key });

    const problem = expectProblem(reply, 403, 'insufficient-scope');
    expect(problem.required_scopes).toEqual(['weather:delete']);
    expect(await storedWeather()).toEqual(before);
  });

  it('GET /v1/weather/{place}: a reader may read a place, its history and the list', async () => {
    const { key } = await createCallerWithKey(test, { role: 'reader' });
    const place = newPlace();
    const recorded = await recordObservation(place);

    const one = await test.call({ url: `/v1/weather/${place}`, key });
    const history = await test.call({ url: `/v1/weather/${place}/observations`, key });
    const list = await test.call({ url: `/v1/weather?name=${place}`, key });

    expect(one.status).toBe(200);
    expect(one.json).toEqual(recorded.json);
    expect(history.status).toBe(200);
    expect(history.json.data).toHaveLength(1);
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual([recorded.json]);
  });

  it.each([
    [
      'PUT',
      (place: string) => ({
        method: 'PUT' as const,
        url: `/v1/weather/${place}`,
        body: buildObservation({ observed_at: '2025-06-01T13:00:00Z' }),
      }),
    ],
    [
      'PATCH',
      (place: string) => ({ method: 'PATCH' as const, url: `/v1/weather/${place}`, body: { name: 'Reader was here' } }),
    ],
    [
      'PUT (creating a place)',
      () => ({ method: 'PUT' as const, url: `/v1/weather/${newPlace()}`, body: buildObservation() }),
    ],
  ])(
    '%s /v1/weather/{place}: 403 insufficient-scope for a reader, and nothing stored changes',
    async (_method, request) => {
      const { key } = await createCallerWithKey(test, { role: 'reader' });
      const place = newPlace();
      await recordObservation(place);
      const before = await storedWeather();

      const reply = await test.call({ ...request(place), key });

      const problem = expectProblem(reply, 403, 'insufficient-scope');
      expect(problem.required_scopes).toEqual(['weather:update']);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it('PUT /v1/weather/{place}: 401 with WWW-Authenticate without credentials, and nothing is stored', async () => {
    const before = await storedWeather();

    const reply = await test.call({
      method: 'PUT',
      url: `/v1/weather/${newPlace()}`,
      key: null,
      body: buildObservation(),
    });

    expectProblem(reply, 401, 'missing-credentials');
    expect(reply.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(await storedWeather()).toEqual(before);
  });
});
