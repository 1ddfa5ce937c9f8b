import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import { createUser } from '../helpers/records.js';

/**
 * HEAD of a body that GET streams (an export, the event stream; an operation's refused rows are
 * in operations.representations.test.ts): the headers GET
 * answers, without a Content-Length, which is not known before the body is written (RFC 9110
 * §9.3.2: HEAD may leave out the headers only the content determines; it must not state a wrong one).
 */
let test: TestApp;
let base: string;
beforeAll(async () => {
  test = await startApp({ ROWI_MAX_EVENT_LOOP_DELAY: '0' });
  base = await listenOnLoopback(test);
  for (let index = 0; index < 3; index++) await createUser(test);
});
afterAll(() => test.close());

/** The status and headers of a request over a real socket (fetch would hide how the answer is framed). */
function headersOf(method: string, path: string, accept: string) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>(
    (resolve, reject) => {
      const outgoing = request(
        `${base}${path}`,
        { method, headers: { accept, 'x-api-key': test.adminKey } },
        (reply) => {
          let body = '';
          reply.setEncoding('utf8');
          reply.on('data', (chunk: string) => (body += chunk));
          reply.on('end', () => resolve({ status: reply.statusCode ?? 0, headers: reply.headers, body }));
        },
      );
      outgoing.on('error', reject);
      outgoing.end();
    },
  );
}

const FRAMING = [
  'content-length',
  'transfer-encoding',
  'date',
  'x-request-id',
  'traceresponse',
  'keep-alive',
  'connection',
];
const withoutFraming = (headers: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !FRAMING.includes(name)));

describe('HEAD of a streamed body', () => {
  it.each([
    ['text/csv', 'users.csv'],
    ['application/x-ndjson', 'users.ndjson'],
  ])('HEAD /v1/users: 200 with the headers of GET and no Content-Length when Accept is %s', async (accept, file) => {
    const get = await headersOf('GET', '/v1/users', accept);
    const head = await headersOf('HEAD', '/v1/users', accept);
    expect(get.status).toBe(200);
    expect(get.body.trim().split('\n').length).toBeGreaterThanOrEqual(3);
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['content-length']).toBeUndefined();
    expect(head.headers['content-disposition']).toBe(`attachment; filename="${file}"`);
    expect(withoutFraming(head.headers)).toEqual(withoutFraming(get.headers));
  });

  it('HEAD /v1/events/stream: 200 with the headers of the stream GET opens and no Content-Length (a stream has no length)', async () => {
    const get = await new Promise<Record<string, string | string[] | undefined>>((resolve, reject) => {
      const outgoing = request(
        `${base}/v1/events/stream`,
        { headers: { accept: 'text/event-stream', 'x-api-key': test.adminKey } },
        (reply) => {
          resolve(reply.headers);
          outgoing.destroy();
        },
      );
      outgoing.on('error', (error) => (error.message.includes('socket hang up') ? undefined : reject(error)));
      outgoing.end();
    });
    const head = await headersOf('HEAD', '/v1/events/stream', 'text/event-stream');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBeUndefined();
    const shown = ['content-type', 'cache-control', 'x-accel-buffering'];
    const pick = (headers: Record<string, unknown>) => Object.fromEntries(shown.map((name) => [name, headers[name]]));
    expect(pick(head.headers)).toEqual(pick(get));
  });

  it('HEAD /v1/users: 200 with a Content-Length equal to the length of GET, when Accept asks for a page (JSON)', async () => {
    const get = await headersOf('GET', '/v1/users', 'application/json');
    const head = await headersOf('HEAD', '/v1/users', 'application/json');
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(get.body)));
  });
});
