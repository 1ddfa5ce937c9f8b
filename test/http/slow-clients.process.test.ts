import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';

/**
 * Slow clients against the built CLI over real sockets (`npm test` builds first): a client that
 * sends its headers or its body a byte at a time is cut off at the header or request time-out,
 * while everyone else keeps being served. The bounds are 2 s here (the defaults are 10 s and
 * 30 s); rowi has Node check them every second, so a cut comes 2–3 s after the request's first byte.
 */

const HEADERS_TIMEOUT_MS = 2000;
const REQUEST_TIMEOUT_MS = 2000;
const pause = (ms: number) => new Promise((resolvePause) => setTimeout(resolvePause, ms));

/** A raw HTTP/1.1 answer that is an RFC 9457 problem of this status and type, closing the connection. */
function expectRawProblem(raw: string, status: number, type: string): void {
  const [head = '', body = ''] = raw.split('\r\n\r\n');
  expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
  expect(head).toMatch(/\r\nconnection: close/i);
  const requestId = /\r\nx-request-id: (\S+)/i.exec(head)?.[1];
  expect(JSON.parse(body)).toMatchObject({
    type: `/problems/${type}`,
    status,
    request_id: requestId,
    instance: `urn:uuid:${requestId}`,
  });
}

/** Sends raw bytes on a new connection and collects the answer until the server closes it. */
function rawExchange(server: RunningServer, bytes: string): Promise<string> {
  const { port } = new URL(server.baseUrl);
  return new Promise((resolveExchange, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(bytes));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('error', () => {});
    socket.on('close', () => resolveExchange(received));
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within 5 s; received ${JSON.stringify(received)}`));
    }, 5000);
  });
}

interface Dribble {
  /** Milliseconds from the first byte to the server ending the connection. */
  cutAfterMs: number;
  /** What the server sent before it ended the connection. */
  received: string;
  bytesSent: number;
}

/**
 * Sends `head` at once, then `tail` one byte every `everyMs` until the server ends the
 * connection (or `giveUpMs` passes, which fails the test's bounds).
 */
function dribble(
  server: RunningServer,
  head: string,
  tail: string,
  everyMs: number,
  giveUpMs = 10_000,
): Promise<Dribble> {
  const { port } = new URL(server.baseUrl);
  return new Promise((resolveDribble) => {
    const socket: Socket = connect(Number(port), '127.0.0.1');
    let received = '';
    let bytesSent = 0;
    let started = 0;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolveDribble({ cutAfterMs: performance.now() - started, received, bytesSent });
    };
    const giveUp = setTimeout(() => socket.destroy(), giveUpMs);
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', finish);
    socket.on('connect', () => {
      started = performance.now();
      socket.write(head);
      bytesSent = head.length;
      let next = 0;
      timer = setInterval(() => {
        if (socket.destroyed || next >= tail.length) return;
        socket.write(tail[next++]!);
        bytesSent++;
      }, everyMs);
    });
  });
}

/** GET /v1/users every 200 ms until `until` settles; the statuses (0: no answer). */
async function servedMeanwhile(server: RunningServer, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const statuses: number[] = [];
  while (!done && statuses.length < 100) {
    try {
      const reply = await fetch(`${server.baseUrl}/v1/users?limit=1`, {
        headers: { 'x-api-key': server.adminKey },
        signal: AbortSignal.timeout(1000),
      });
      await reply.arrayBuffer();
      statuses.push(reply.status);
    } catch {
      statuses.push(0);
    }
    await pause(200);
  }
  return statuses;
}

describe('slow clients, over a real socket', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({
      env: {
        ROWI_HEADERS_TIMEOUT: String(HEADERS_TIMEOUT_MS),
        ROWI_REQUEST_TIMEOUT: String(REQUEST_TIMEOUT_MS),
        // Shorter than the slow body takes: a slow upload is the request time-out's (408), never the handler budget's 503.
        ROWI_HANDLER_TIMEOUT: '1000',
        // Off: on a busy test machine, shedding would be a right answer to another question.
        ROWI_MAX_EVENT_LOOP_DELAY: '0',
      },
    });
  });
  afterAll(async () => {
    expect(await server.stop()).toBe(0);
  });

  it('GET /v1/users: a client sending its headers a byte a second (slowloris) is cut off at the header time-out (408 or closed), while other connections get 200 meanwhile', async () => {
    const slow = dribble(server, 'GET /v1/users HTTP/1.1\r\nHost: x\r\n', `X-Slow: ${'a'.repeat(60)}\r\n\r\n`, 1000);
    const statuses = await servedMeanwhile(server, slow);
    const { cutAfterMs, received, bytesSent } = await slow;

    expect(cutAfterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
    expect(cutAfterMs).toBeLessThan(HEADERS_TIMEOUT_MS + 2000);
    // The headers never ended, so no request reached rowi: Node's parser answers (408) or just closes.
    if (received !== '') expectRawProblem(received, 408, 'request-timeout');
    expect(bytesSent).toBeLessThan(40);
    expect(statuses.length).toBeGreaterThanOrEqual(5);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
  });

  it('POST /v1/users: a body sent a byte every 300 ms is cut off at the request time-out (408 or closed) and nothing is stored', async () => {
    const email = 'slow.body@example.com';
    const body = JSON.stringify({ name: 'Slow Body', email }).padEnd(100, ' ');
    expect(body).toHaveLength(100);
    const head =
      `POST /v1/users HTTP/1.1\r\nHost: x\r\nX-API-Key: ${server.adminKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n` +
      body.slice(0, 10);

    const slow = dribble(server, head, body.slice(10), 300);
    const statuses = await servedMeanwhile(server, slow);
    const { cutAfterMs, received, bytesSent } = await slow;

    expect(cutAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
    expect(cutAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 2000);
    if (received !== '') expectRawProblem(received, 408, 'request-timeout');
    expect(bytesSent).toBeLessThan(head.length + 90);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // The body never arrived whole: the handler never ran.
    await pause(500);
    const list = await fetch(`${server.baseUrl}/v1/users?email=${encodeURIComponent(email)}`, {
      headers: { 'x-api-key': server.adminKey },
    });
    expect(list.status).toBe(200);
    expect(((await list.json()) as { data: unknown[] }).data).toEqual([]);
    expect(server.child.exitCode).toBeNull();
  });
});

describe('malformed requests, over a real socket', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ env: { ROWI_MAX_EVENT_LOOP_DELAY: '0' } });
  });
  afterAll(async () => {
    await server.stop();
  });

  it('headers larger than Node reads (20 KB): 431 headers-too-large problem, connection closed', async () => {
    expectRawProblem(
      await rawExchange(server, `GET /v1 HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
      431,
      'headers-too-large',
    );
  });

  it('a request line that is not HTTP: 400 bad-request problem, connection closed', async () => {
    expectRawProblem(await rawExchange(server, 'HELLO THERE\r\n\r\n'), 400, 'bad-request');
  });
});
