import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildObservation, DOCUMENTED_CONDITIONS, weatherHelpers } from '../helpers/weather.js';

/**
 * The bad input of /v1/weather: bodies PUT refuses, and path segments that are not places. Each
 * gets a clear RFC 9457 problem, and nothing stored changes.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const { newPlace, putObservation, recordObservation, storedPlace, storedWeather } = weatherHelpers(() => test);

const ONE_OF_CONDITIONS = `must be one of ${JSON.stringify(DOCUMENTED_CONDITIONS)}`;
const NOT_RFC3339 =
  'must be a valid RFC 3339 date-time with a time zone, from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z (no leap second)';

/**
 * Bodies PUT must refuse with 422: [case, member, its value as raw JSON text (so 1e400 reaches the
 * parser as written), problem type, pointer, detail]. Every other member is valid.
 */
const BAD_MEMBERS: [string, string, string, string, string, unknown][] = [
  ['temperature_c is 71', 'temperature_c', '71', 'validation-failed', '#/temperature_c', 'must be at most 70'],
  ['temperature_c is -101', 'temperature_c', '-101', 'validation-failed', '#/temperature_c', 'must be at least -100'],
  [
    'temperature_c is -1e400 (beyond a double)',
    'temperature_c',
    '-1e400',
    'validation-failed',
    '#/temperature_c',
    'must be at least -100',
  ],
  ['humidity_pct is 101', 'humidity_pct', '101', 'validation-failed', '#/humidity_pct', 'must be at most 100'],
  ['humidity_pct is -0.5', 'humidity_pct', '-0.5', 'validation-failed', '#/humidity_pct', 'must be at least 0'],
  ['wind_kph is -1', 'wind_kph', '-1', 'validation-failed', '#/wind_kph', 'must be at least 0'],
  [
    'wind_kph is 1e400 (beyond a double: Infinity)',
    'wind_kph',
    '1e400',
    'validation-failed',
    '#/wind_kph',
    'must be at most 500',
  ],
  ['wind_kph is 501', 'wind_kph', '501', 'validation-failed', '#/wind_kph', 'must be at most 500'],
  [
    'temperature_c is the string "21.5"',
    'temperature_c',
    '"21.5"',
    'validation-failed',
    '#/temperature_c',
    'must be a number',
  ],
  [
    'humidity_pct is the string "40"',
    'humidity_pct',
    '"40"',
    'validation-failed',
    '#/humidity_pct',
    'must be a number',
  ],
  ['wind_kph is the string "12"', 'wind_kph', '"12"', 'validation-failed', '#/wind_kph', 'must be a number'],
  ['temperature_c is null', 'temperature_c', 'null', 'validation-failed', '#/temperature_c', 'must be a number'],
  ['temperature_c is true', 'temperature_c', 'true', 'validation-failed', '#/temperature_c', 'must be a number'],
  ['observed_at is "yesterday"', 'observed_at', '"yesterday"', 'validation-failed', '#/observed_at', NOT_RFC3339],
  [
    'observed_at has month 13',
    'observed_at',
    '"2026-13-01T00:00:00Z"',
    'validation-failed',
    '#/observed_at',
    NOT_RFC3339,
  ],
  [
    'observed_at is February 30',
    'observed_at',
    '"2025-02-30T00:00:00Z"',
    'validation-failed',
    '#/observed_at',
    NOT_RFC3339,
  ],
  [
    'observed_at has hour 24',
    'observed_at',
    '"2025-06-01T24:00:00Z"',
    'validation-failed',
    '#/observed_at',
    NOT_RFC3339,
  ],
  [
    'observed_at has no time zone',
    'observed_at',
    '"2025-06-01T12:00:00"',
    'validation-failed',
    '#/observed_at',
    NOT_RFC3339,
  ],
  ['observed_at is a date only', 'observed_at', '"2025-06-01"', 'validation-failed', '#/observed_at', NOT_RFC3339],
  ['observed_at is empty', 'observed_at', '""', 'validation-failed', '#/observed_at', NOT_RFC3339],
  [
    'observed_at is epoch seconds',
    'observed_at',
    '1748779200',
    'validation-failed',
    '#/observed_at',
    'must be a string',
  ],
  [
    'observed_at is one hour in the future',
    'observed_at',
    JSON.stringify(new Date(Date.now() + 3_600_000).toISOString()),
    'validation-failed',
    '#/observed_at',
    expect.stringMatching(/^is ahead of the server's clock \(\d{4}-.+Z\) by more than 5 minutes$/),
  ],
  [
    'observed_at is one hour in the future, written with an offset',
    'observed_at',
    JSON.stringify(new Date(Date.now() + 3_600_000 + 9 * 3_600_000).toISOString().replace('Z', '+09:00')),
    'validation-failed',
    '#/observed_at',
    expect.stringMatching(/^is ahead of the server's clock/),
  ],
  [
    'conditions is an unknown word ("sunny")',
    'conditions',
    '"sunny"',
    'validation-failed',
    '#/conditions',
    ONE_OF_CONDITIONS,
  ],
  [
    'conditions is a known word in another case ("Clear")',
    'conditions',
    '"Clear"',
    'validation-failed',
    '#/conditions',
    ONE_OF_CONDITIONS,
  ],
  ['conditions is empty', 'conditions', '""', 'validation-failed', '#/conditions', ONE_OF_CONDITIONS],
  ['source is empty', 'source', '""', 'validation-failed', '#/source', 'must not be empty'],
  [
    'source has 65 characters',
    'source',
    JSON.stringify('s'.repeat(65)),
    'validation-failed',
    '#/source',
    expect.any(String),
  ],
  [
    'source has a control character',
    'source',
    '"feed\\u0007"',
    'validation-failed',
    '#/source',
    'must contain a visible character, and no control, invisible (zero-width, byte order mark) or bidirectional-control characters, nor line or paragraph separators',
  ],
  ['name is empty', 'name', '""', 'validation-failed', '#/name', expect.any(String)],
  ['latitude is 91', 'latitude', '91', 'validation-failed', '#/latitude', 'must be at most 90'],
  [
    'latitude comes without longitude',
    'latitude',
    '35.68',
    'validation-failed',
    '#/latitude',
    'latitude and longitude are set or cleared together',
  ],
  ['an unknown field is sent', 'pressure_hpa', '1013', 'validation-failed', '#/pressure_hpa', 'is not a known field'],
  ['stale (read-only, not stored) is sent', 'stale', 'false', 'validation-failed', '#/stale', 'is not a known field'],
  [
    'place names another place',
    'place',
    '"somewhere-else"',
    'read-only-field',
    '#/place',
    'is read-only and differs from the place in the path',
  ],
  [
    'id differs from the stored one',
    'id',
    '987654',
    'read-only-field',
    '#/id',
    'is read-only and differs from the stored value',
  ],
  [
    'created_at differs from the stored one',
    'created_at',
    '"2000-01-01T00:00:00Z"',
    'read-only-field',
    '#/created_at',
    'is read-only and differs from the stored value',
  ],
];

const REQUIRED_MEMBERS = ['temperature_c', 'humidity_pct', 'wind_kph', 'conditions', 'observed_at'];

/** A PUT body as JSON text: a valid observation with one member replaced (or, with raw undefined, left out). */
function observationText(member: string, raw: string | undefined): string {
  const members = Object.entries(buildObservation())
    .filter(([name]) => name !== member)
    .map(([name, value]) => `${JSON.stringify(name)}:${JSON.stringify(value)}`);
  if (raw !== undefined) members.push(`${JSON.stringify(member)}:${raw}`);
  return `{${members.join(',')}}`;
}

describe('PUT /v1/weather/{place}: bodies that are refused', () => {
  const EXISTING = 'refusal-target';
  beforeAll(async () => {
    await recordObservation(EXISTING, { observed_at: '2025-06-01T12:00:00Z' });
  });

  /** Each case against a place that does not exist yet (nothing may be created) and one that does (nothing may change). */
  const targets = [
    ['a new place', () => newPlace('refused')],
    ['an existing place', () => EXISTING],
  ] as const;

  it.each(
    BAD_MEMBERS.flatMap(([label, member, raw, type, pointer, detail]) =>
      targets.map(([target, place]) => [type, label, target, member, raw, pointer, detail, place] as const),
    ),
  )(
    'PUT /v1/weather/{place}: 422 %s when %s for %s, with the pointer, and nothing stored changes',
    async (type, _label, _target, member, raw, pointer, detail, place) => {
      const before = await storedWeather();

      const reply = await putObservation(place(), observationText(member, raw), { 'content-type': 'application/json' });

      const problem = expectProblem(reply, 422, type);
      expect(problem.errors).toEqual([{ in: 'body', pointer, detail }]);
      expect(problem.detail).toContain(member);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each(REQUIRED_MEMBERS.flatMap((member) => targets.map(([target, place]) => [member, target, place] as const)))(
    'PUT /v1/weather/{place}: 422 validation-failed at #/%s "is required" when it is missing, for %s, and nothing stored changes',
    async (member, _target, place) => {
      const before = await storedWeather();

      const reply = await putObservation(place(), observationText(member, undefined), {
        'content-type': 'application/json',
      });

      const problem = expectProblem(reply, 422, 'validation-failed');
      expect(problem.errors).toEqual([{ in: 'body', pointer: `#/${member}`, detail: 'is required' }]);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each([
    [422, 'validation-failed', 'the body is an empty object', 'application/json', '{}'],
    [422, 'validation-failed', 'the body is an array', 'application/json', '[21.5]'],
    [400, 'malformed-body', 'the body is malformed JSON', 'application/json', '{"temperature_c":'],
    [415, 'unsupported-media-type', 'the body is plain text', 'text/plain', '21.5 degrees'],
    [
      422,
      'validation-failed',
      'an XML body has a number that is not one',
      'application/xml',
      '<weather><temperature_c>warm</temperature_c><humidity_pct>40</humidity_pct><wind_kph>3</wind_kph><conditions>rain</conditions><observed_at>2025-06-01T12:00:00Z</observed_at></weather>',
    ],
    [400, 'malformed-body', 'an XML body is not well-formed', 'application/xml', '<weather><temperature_c>1</weather>'],
  ] as const)(
    'PUT /v1/weather/{place}: %i %s when %s, and nothing stored changes',
    async (status, type, _case, contentType, text) => {
      const before = await storedWeather();

      const reply = await putObservation(newPlace('refused'), text, { 'content-type': contentType });

      expectProblem(reply, status, type);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it('PUT /v1/weather/{place}: 422 listing every missing member when the body is empty, and nothing stored changes', async () => {
    const before = await storedWeather();

    const reply = await putObservation(newPlace('refused'), {});

    const problem = expectProblem(reply, 422, 'validation-failed');
    expect(problem.errors?.map((error) => error.pointer).sort()).toEqual(
      REQUIRED_MEMBERS.map((member) => `#/${member}`).sort(),
    );
    expect(await storedWeather()).toEqual(before);
  });

  it('PUT /v1/weather/{place}: a problem in XML when the client accepts only XML, and nothing stored changes', async () => {
    const before = await storedWeather();

    const reply = await putObservation(newPlace('refused'), buildObservation({ wind_kph: -1 }), {
      accept: 'application/xml',
    });

    expect(reply.status).toBe(422);
    expect(reply.mediaType).toBe('application/problem+xml');
    expect(reply.text).toContain('<type>/problems/validation-failed</type>');
    expect(reply.text).toContain('<pointer>#/wind_kph</pointer>');
    expect(await storedWeather()).toEqual(before);
  });
});

/**
 * Path segments that cannot name a place (docs/guide.md "Weather": a slug of letters, digits and hyphens, 1–64).
 * As with non-numeric ids, a URL that cannot name a place names none: 404 on every method.
 */
const NOT_SLUGS: [string, string][] = [
  ['../etc, percent-encoded', '..%2Fetc'],
  ['a b, percent-encoded', 'a%20b'],
  ['65 characters', 'a'.repeat(65)],
  ['non-ASCII (tōkyō)', 't%C5%8Dky%C5%8D'],
  ['tokyo with a trailing newline', 'tokyo%0A'],
  ['a NUL byte', 'tok%00yo'],
  ['a dot', 'new.york'],
  ['an underscore', 'new_york'],
  ['a quote (SQL)', "tokyo'%20OR%20'1'='1"],
  ['a percent-encoded percent', 'tokyo%2525'],
];

const METHODS = [
  ['GET', (url: string) => ({ method: 'GET' as const, url })],
  ['PUT', (url: string) => ({ method: 'PUT' as const, url, body: buildObservation() })],
  ['PATCH', (url: string) => ({ method: 'PATCH' as const, url, body: { name: 'x' } })],
  ['DELETE', (url: string) => ({ method: 'DELETE' as const, url })],
  ['GET observations of', (url: string) => ({ method: 'GET' as const, url: `${url}/observations` })],
] as const;

describe('/v1/weather/{place}: segments that are not place slugs', () => {
  beforeAll(async () => {
    // A place whose slug the bad segments resemble, so a request that wrongly reached it would change it.
    for (const place of ['tokyo', 'etc', 'a', 'a-b', 'tokyo2525']) await recordObservation(place);
  });

  it.each(
    NOT_SLUGS.flatMap(([label, segment]) =>
      METHODS.map(([method, request]) => [method, label, segment, request] as const),
    ),
  )(
    '%s /v1/weather/{place}: 404 not-found when the place is %s, and nothing stored changes',
    async (_method, _label, segment, request) => {
      const before = await storedWeather();

      const sent = request(`/v1/weather/${segment}`);

      const reply = await test.call(sent);

      const problem = expectProblem(reply, 404, 'not-found');
      expect(problem.instance).toBe(sent.url);
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each([
    ['GET', { method: 'GET' as const }],
    ['PUT', { method: 'PUT' as const, body: buildObservation() }],
    ['PATCH', { method: 'PATCH' as const, body: { name: 'x' } }],
    ['DELETE', { method: 'DELETE' as const }],
  ])(
    '%s /v1/weather/: 308 to /v1/weather (a trailing slash names the collection), never a place with an empty name and never a fault; nothing stored changes',
    async (_method, request) => {
      const before = await storedWeather();

      const reply = await test.call({ ...request, url: '/v1/weather/' });

      expect(reply.status).toBe(308);
      expect(reply.headers.location).toBe('/v1/weather');
      expect(await storedWeather()).toEqual(before);
    },
  );

  it.each([
    ['GET', 'GET', undefined],
    ['PUT', 'PUT', buildObservation()],
  ] as const)(
    '%s /v1/weather/../etc: 404 not-found when the dot segment is sent raw over a real socket (and when injected), and nothing stored changes',
    async (_method, method, body) => {
      const before = await storedWeather();

      const injected = await test.call({ method, url: '/v1/weather/../etc', ...(body ? { body } : {}) });
      const raw = await rawRequest(method, '/v1/weather/../etc', body);
      const rawEncoded = await rawRequest(method, '/v1/weather/..%2Fetc', body);

      expectProblem(injected, 404, 'not-found');
      for (const reply of [raw, rawEncoded]) {
        expect(reply.status).toBe(404);
        expect(reply.contentType).toMatch(/^application\/problem\+json/);
        expect(JSON.parse(reply.text)).toMatchObject({
          type: '/problems/not-found',
          title: 'Not found',
          status: 404,
          detail: expect.any(String),
          instance: expect.stringMatching(/^\/v1\//),
          request_id: expect.any(String),
        });
      }
      expect(await storedWeather()).toEqual(before);
      expect((await storedPlace('etc'))?.version).toBe(before.places.find((row) => row.place === 'etc')?.version);
    },
  );
});

let origin: Promise<{ host: string; port: number }> | undefined;

/** The test app on a real socket (started once, closed with the app): inject normalises dot segments, a socket does not. */
function listening() {
  origin ??= test.app
    .listen({ host: '127.0.0.1', port: 0 })
    .then(() => ({ host: '127.0.0.1', port: (test.app.server.address() as AddressInfo).port }));
  return origin;
}

/** One request with the path sent exactly as given (node:http does not resolve dot segments). */
async function rawRequest(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; contentType: string; text: string }> {
  const { host, port } = await listening();
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host,
        port,
        method,
        path,
        headers: { 'x-api-key': test.adminKey, ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            contentType: String(response.headers['content-type'] ?? ''),
            text,
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}
