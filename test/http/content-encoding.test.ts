import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';

/**
 * Request bodies with a Content-Encoding (docs/conventions.md): decoded (gzip, deflate,
 * br) for JSON, XML and batches alike, the body limit counting decoded bytes; any other coding 415.
 */
let test: TestApp;
beforeAll(async () => {
  test = await startApp({ ROWI_BODY_LIMIT: '65536' });
});
afterAll(() => test.close());

async function send(method: 'POST' | 'PATCH', url: string, body: Buffer, headers: Record<string, string>) {
  const response = await test.app.inject({
    method,
    url,
    payload: body,
    headers: { 'x-api-key': test.adminKey, ...headers },
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    text: response.body,
    json: response.body === '' ? undefined : JSON.parse(response.body),
    mediaType: String(response.headers['content-type'] ?? '').split(';')[0]!,
  };
}

const usersByEmail = async (email: string) =>
  (await test.call({ url: `/v1/users?email=${encodeURIComponent(email)}` })).json.data as { name: string }[];

describe('request bodies with a Content-Encoding', () => {
  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ])('POST /v1/users: 201 for a JSON body sent with Content-Encoding: %s', async (coding, encode) => {
    const email = `json-${coding}@example.com`;
    const reply = await send('POST', '/v1/users', encode(Buffer.from(JSON.stringify({ name: 'Zipped', email }))), {
      'content-type': 'application/json',
      'content-encoding': coding,
    });
    expect(reply.status, reply.text).toBe(201);
    expect(await usersByEmail(email)).toEqual([expect.objectContaining({ name: 'Zipped' })]);
  });

  it('POST /v1/users: 201 for an XML body sent gzipped; PATCH /v1/users/{id}: 200 for a merge patch sent gzipped', async () => {
    const xml = '<user><name>Xavier</name><email>xml-gzip@example.com</email></user>';
    const created = await send('POST', '/v1/users', gzipSync(Buffer.from(xml)), {
      'content-type': 'application/xml',
      'content-encoding': 'gzip',
    });
    expect(created.status, created.text).toBe(201);
    const id = Number(String(created.headers.location).split('/').pop());
    const patched = await send('PATCH', `/v1/users/${id}`, gzipSync(Buffer.from('{"name":"Xavi"}')), {
      'content-type': 'application/merge-patch+json',
      'content-encoding': 'gzip',
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.name).toBe('Xavi');
  });

  it('POST /v1/users/batch: 200 for a batch sent gzipped', async () => {
    const batch = { create: [{ name: 'Batched', email: 'batch-gzip@example.com' }] };
    const reply = await send('POST', '/v1/users/batch', gzipSync(Buffer.from(JSON.stringify(batch))), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expect(reply.status, reply.text).toBe(200);
    expect(await usersByEmail('batch-gzip@example.com')).toHaveLength(1);
  });

  it('POST /v1/users: 413 body-too-large for a small gzip body that inflates past ROWI_BODY_LIMIT, nothing created', async () => {
    const body = gzipSync(Buffer.from(JSON.stringify({ name: 'x'.repeat(5_000_000), email: 'bomb@example.com' })));
    expect(body.length).toBeLessThan(65536);
    const reply = await send('POST', '/v1/users', body, {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expectProblem(reply, 413, 'body-too-large');
    expect(await usersByEmail('bomb@example.com')).toEqual([]);
  });

  it('POST /v1/users: 400 malformed-body when the body is not the gzip its Content-Encoding says', async () => {
    const reply = await send('POST', '/v1/users', Buffer.from('{"name":"Plain","email":"plain@example.com"}'), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expectProblem(reply, 400, 'malformed-body');
    expect(reply.json.detail).toContain('not gzip data');
    expect(await usersByEmail('plain@example.com')).toEqual([]);
  });

  it.each(['zstd', 'gzip, gzip', 'compress'])(
    'POST /v1/users: 415 with Accept-Encoding naming gzip, deflate and br for Content-Encoding: %s',
    async (coding) => {
      const reply = await send('POST', '/v1/users', Buffer.from('{"name":"No","email":"no-coding@example.com"}'), {
        'content-type': 'application/json',
        'content-encoding': coding,
      });
      expectProblem(reply, 415, 'unsupported-media-type');
      expect(reply.headers['accept-encoding']).toBe('gzip, deflate, br');
      expect(reply.json.accepted_encodings).toEqual(['gzip', 'deflate', 'br']);
      expect(await usersByEmail('no-coding@example.com')).toEqual([]);
    },
  );

  it('POST /v1/users: Content-Encoding: identity is no coding at all (201)', async () => {
    const reply = await send('POST', '/v1/users', Buffer.from('{"name":"Plain","email":"identity@example.com"}'), {
      'content-type': 'application/json',
      'content-encoding': 'identity',
    });
    expect(reply.status, reply.text).toBe(201);
  });
});
