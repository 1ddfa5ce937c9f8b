import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { storedUsers } from '../helpers/stored.js';

const APP = 'https://app.example.com';
const OTHER = 'https://evil.example.net';

const preflight = (origin: string, method: string, headers = 'x-api-key, content-type') => ({
  origin,
  'access-control-request-method': method,
  'access-control-request-headers': headers,
});

describe('CORS with ROWI_CORS_ORIGINS set', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_CORS_ORIGINS: `${APP},http://localhost:5173` });
  });
  afterAll(() => test.close());

  it("OPTIONS /v1/users: a preflight from an allowed origin is 204 with that origin, the path's methods, the headers rowi reads, and a cache time", async () => {
    const reply = await test.call({ method: 'OPTIONS', url: '/v1/users', key: null, headers: preflight(APP, 'POST') });
    expect(reply.status).toBe(204);
    expect(reply.headers['access-control-allow-origin']).toBe(APP);
    expect(reply.headers['access-control-allow-methods']).toBe('GET, HEAD, POST, OPTIONS');
    const allowedHeaders = String(reply.headers['access-control-allow-headers']).toLowerCase().split(', ');
    expect(allowedHeaders).toEqual(
      expect.arrayContaining([
        'x-api-key',
        'content-type',
        'authorization',
        'if-match',
        'idempotency-key',
        'traceparent',
      ]),
    );
    expect(reply.headers['access-control-max-age']).toBe('7200');
    expect(reply.headers['access-control-allow-credentials']).toBeUndefined();
    expect(String(reply.headers.vary)).toMatch(/Origin/);
  });

  it('OPTIONS /v1/users/{id}: the preflight names the methods of that path', async () => {
    const reply = await test.call({
      method: 'OPTIONS',
      url: '/v1/users/1',
      key: null,
      headers: preflight(APP, 'DELETE'),
    });
    expect(reply.status).toBe(204);
    expect(reply.headers['access-control-allow-methods']).toBe('GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  });

  it('origins are compared without regard to case, as browsers lower-case them', async () => {
    const reply = await test.call({ url: '/v1/users', headers: { origin: 'http://LOCALHOST:5173' } });
    expect(reply.headers['access-control-allow-origin']).toBe('http://LOCALHOST:5173');
  });

  it('GET /v1/users: a request from an allowed origin gets Access-Control-Allow-Origin and the headers its script may read', async () => {
    const reply = await test.call({ url: '/v1/users', headers: { origin: APP } });
    expect(reply.status).toBe(200);
    expect(reply.headers['access-control-allow-origin']).toBe(APP);
    const exposed = String(reply.headers['access-control-expose-headers']).toLowerCase().split(', ');
    expect(exposed).toEqual(
      expect.arrayContaining([
        'etag',
        'location',
        'link',
        'ratelimit',
        'ratelimit-policy',
        'retry-after',
        'x-request-id',
        'traceresponse',
      ]),
    );
    expect(String(reply.headers.vary).split(', ')).toEqual(expect.arrayContaining(['Origin', 'Accept']));
  });

  it("GET /v1/users: a refusal (401 without credentials) carries the CORS headers too, so the browser's script can read the problem", async () => {
    const reply = await test.call({ url: '/v1/users', key: null, headers: { origin: APP } });
    expectProblem(reply, 401, 'missing-credentials');
    expect(reply.headers['access-control-allow-origin']).toBe(APP);
  });

  it('a request from an origin not in the list gets no CORS header (the browser withholds the answer), and its preflight allows nothing', async () => {
    const get = await test.call({ url: '/v1/users', headers: { origin: OTHER } });
    expect(get.status).toBe(200);
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
    const before = await storedUsers(test);
    const options = await test.call({
      method: 'OPTIONS',
      url: '/v1/users',
      key: null,
      headers: preflight(OTHER, 'POST'),
    });
    expect(options.headers['access-control-allow-origin']).toBeUndefined();
    expect(options.headers['access-control-allow-methods']).toBeUndefined();
    expect(await storedUsers(test)).toEqual(before);
  });

  it("OPTIONS without a preflight's headers is answered as ever: 204 with Allow; an unknown path is still 404", async () => {
    const plain = await test.call({ method: 'OPTIONS', url: '/v1/users', key: null });
    expect(plain.status).toBe(204);
    expect(plain.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
    const withOrigin = await test.call({ method: 'OPTIONS', url: '/v1/users', key: null, headers: { origin: APP } });
    expect(withOrigin.status).toBe(204);
    expect(withOrigin.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
    expectProblem(
      await test.call({ method: 'OPTIONS', url: '/v1/nothing-here', key: null, headers: preflight(APP, 'GET') }),
      404,
      'not-found',
    );
    expectProblem(
      await test.call({ method: 'GET', url: '/v1/nothing-here', headers: { origin: APP } }),
      404,
      'not-found',
    );
  });

  it('PATCH /v1/users: 405 with Allow as ever, with CORS on', async () => {
    expectProblem(await test.call({ method: 'PATCH', url: '/v1/users', body: {} }), 405, 'method-not-allowed');
  });
});

describe('CORS with ROWI_CORS_ORIGINS=*', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp({ ROWI_CORS_ORIGINS: '*' });
  });
  afterAll(() => test.close());

  it('GET /v1/users: any origin gets Access-Control-Allow-Origin: *', async () => {
    const reply = await test.call({ url: '/v1/users', headers: { origin: OTHER } });
    expect(reply.headers['access-control-allow-origin']).toBe('*');
  });
});

describe('CORS off (the default)', () => {
  let test: TestApp;
  beforeAll(async () => {
    test = await startApp();
  });
  afterAll(() => test.close());

  it('no CORS header on a request or a preflight from any origin; OPTIONS still 204 with Allow', async () => {
    const get = await test.call({ url: '/v1/users', headers: { origin: APP } });
    expect(Object.keys(get.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
    const options = await test.call({
      method: 'OPTIONS',
      url: '/v1/users',
      key: null,
      headers: preflight(APP, 'POST'),
    });
    expect(options.status).toBe(204);
    expect(Object.keys(options.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
    expect(options.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
  });
});

describe('ROWI_CORS_ORIGINS: a bad value stops rowi at start with a message naming it', () => {
  it.each([
    'https://app.example.com/',
    'app.example.com',
    'https://app.example.com/path',
    'https://a.example.com,,https://b.example.com',
    'ftp://app.example.com',
    '*,https://a.example.com',
  ])('%j', (value) => {
    expect(() => loadConfig({ ROWI_CORS_ORIGINS: value })).toThrow(/ROWI_CORS_ORIGINS/);
  });
});
