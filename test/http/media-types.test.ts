import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { startApp, type TestApp } from '../helpers/app.js';

/**
 * rowi speaks XML wherever it chooses the format (health probes included), and ignores Accept
 * where a standard fixes the format as JSON (the token endpoint, the key set, the authorization
 * server metadata, the OpenAPI document), which the OpenAPI document says for each.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp();
});
afterAll(() => test.close());

const FIXED_JSON: [string, string, string][] = [
  ['GET', '/.well-known/jwks.json', 'RFC 7517'],
  ['GET', '/.well-known/oauth-authorization-server', 'RFC 8414'],
  ['GET', '/v1/openapi.json', 'openapi.json'],
];

describe('health probes in XML', () => {
  it('GET /health/live: 200 as XML when Accept asks for application/xml', async () => {
    const reply = await test.call({ url: '/health/live', key: null, headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toBe(
      `<?xml version="1.0" encoding="UTF-8"?>\n<health><status>pass</status><version>${VERSION}</version></health>`,
    );
  });

  it('GET /health/ready: 200 as XML with each check an element', async () => {
    const reply = await test.call({ url: '/health/ready', key: null, headers: { accept: 'text/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/xml');
    expect(reply.text).toMatch(
      /^<\?xml version="1.0" encoding="UTF-8"\?>\n<health><status>pass<\/status><version>[^<]+<\/version><checks><database><status>pass<\/status><duration_ms>[\d.]+<\/duration_ms><\/database><migrations><status>pass<\/status>/,
    );
  });
});

describe('formats fixed by a standard', () => {
  it.each(FIXED_JSON)('%s %s: 200 JSON, no Vary: Accept, when Accept asks only for XML', async (method, url) => {
    const reply = await test.call({ method: method as 'GET', url, key: null, headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json).toBeTypeOf('object');
    expect(reply.headers.vary).toBeUndefined();
  });

  it('POST /oauth/token: 200 JSON token when Accept asks only for XML', async () => {
    const reply = await test.call({
      method: 'POST',
      url: '/oauth/token',
      key: null,
      headers: { accept: 'application/xml', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'admin',
        client_secret: test.adminKey,
      }).toString(),
    });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
    expect(reply.json.token_type).toBe('Bearer');
  });

  it('the OpenAPI document: each of them says its format is fixed, and lists no 406', async () => {
    const document = test.app.swagger() as unknown as {
      paths: Record<
        string,
        Record<string, { description?: string; responses: Record<string, unknown>; 'x-json-fixed-by'?: string }>
      >;
    };
    for (const [method, url, standard] of [...FIXED_JSON, ['POST', '/oauth/token', 'RFC 6749'] as const]) {
      const operation = document.paths[url]![method.toLowerCase()]!;
      expect(operation['x-json-fixed-by'], url).toContain(standard);
      expect(operation.description, url).toMatch(/JSON whatever Accept asks for/);
      expect(Object.keys(operation.responses), url).not.toContain('406');
    }
    expect(Object.keys(document.paths['/health/live']!.get!.responses)).toContain('406');
  });
});
