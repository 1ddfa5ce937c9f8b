import { Agent, request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { serverPool, type RunningServer } from '../helpers/process.js';

/**
 * Draining under keep-alive load, over real sockets against the built CLI: clients that each
 * keep one connection and send GET and POST back to back, and SIGTERM in the middle. No request
 * that reached rowi ends in a reset: each is answered (those answered once the drain began with
 * `Connection: close`), and a client's next request after that finds no one listening
 * (ECONNREFUSED) rather than a connection cut under it. (Node's http.Server.close() closes idle
 * keep-alive connections at once, which cut 2–16 requests of such a load.)
 */
const { serve, killAll } = serverPool();
afterEach(killAll);

const CLIENTS = 8;
const SIGNAL_AFTER = 300;
const MAX_REQUESTS = 5000;
const LOAD_MS = 20_000;

interface Outcome {
  client: number;
  method: string;
  sentAt: number;
  status?: number;
  connection?: string;
  error?: string;
}

function send(
  agent: Agent,
  server: RunningServer,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  body?: unknown,
): Promise<{ status: number; connection?: string; body: string }> {
  const url = new URL(`${server.baseUrl}/v1${path}`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolveSend, reject) => {
    const outgoing = httpRequest(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: {
          'x-api-key': server.adminKey,
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () =>
          resolveSend({ status: response.statusCode ?? 0, connection: response.headers.connection, body: text }),
        );
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

async function drainUnderLoad(workers: number) {
  const server = await serve({
    env: {
      ROWI_WORKERS: String(workers),
      ROWI_RATE_LIMIT_ADMIN: '0',
      ROWI_RATE_LIMIT_ORDERS_CREATE: '0',
      ROWI_MAX_EVENT_LOOP_DELAY: '0',
    },
  });
  const setup = new Agent({ keepAlive: false });
  const user = JSON.parse(
    (await send(setup, server, 'POST', '/users', { name: 'Drain', email: `drain.keepalive.${workers}@example.com` }))
      .body,
  ) as { id: number };
  const item = JSON.parse(
    (await send(setup, server, 'POST', '/items', { name: 'Drained', sku: `DRAIN-KA-${workers}`, price: '1.00' })).body,
  ) as { id: number };
  expect((await send(setup, server, 'PUT', `/items/${item.id}/stock`, { quantity: 1_000_000 })).status).toBe(200);

  const outcomes: Outcome[] = [];
  let sent = 0;
  let signalledAt = Infinity;
  let drainingSeenAt = Infinity;
  const deadline = performance.now() + LOAD_MS;
  const client = async (index: number) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (sent < MAX_REQUESTS && performance.now() < deadline) {
        sent++;
        const method = sent % 2 === 0 ? 'GET' : 'POST';
        const outcome: Outcome = { client: index, method, sentAt: performance.now() };
        outcomes.push(outcome);
        try {
          const reply =
            method === 'GET'
              ? await send(agent, server, 'GET', `/users/${user.id}`)
              : await send(agent, server, 'POST', '/orders', {
                  name: `KA-${sent}`,
                  user_id: user.id,
                  lines: [{ item_id: item.id, quantity: 1 }],
                });
          outcome.status = reply.status;
          outcome.connection = reply.connection;
        } catch (error) {
          outcome.error = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
          // Nobody listens any more: this client is done.
          if (outcome.error === 'ECONNREFUSED') return;
        }
        if (signalledAt === Infinity && outcomes.filter((done) => done.status !== undefined).length >= SIGNAL_AFTER) {
          signalledAt = performance.now();
          server.child.kill('SIGTERM');
        }
      }
    } finally {
      agent.destroy();
    }
  };
  const watcher = (async () => {
    while (server.child.exitCode === null && performance.now() < deadline + 15_000) {
      // Every process that serves (each worker) says when its drain began.
      if (drainingSeenAt === Infinity && server.stdout().split('"msg":"draining:').length > workers)
        drainingSeenAt = performance.now();
      await new Promise((resolvePause) => setTimeout(resolvePause, 2));
    }
  })();
  await Promise.all(Array.from({ length: CLIENTS }, (_, index) => client(index)));
  const code = await server.exited;
  await watcher;

  const errors = outcomes.filter((outcome) => outcome.error !== undefined);
  const answered = outcomes.filter((outcome) => outcome.status !== undefined);
  console.log(
    `drain under keep-alive load (${workers} process${workers > 1 ? 'es' : ''}): ${outcomes.length} requests, ${answered.length} answered, errors ${JSON.stringify(errors.map((outcome) => outcome.error))}`,
  );

  expect(signalledAt).toBeLessThan(Infinity);
  expect(drainingSeenAt).toBeLessThan(Infinity);
  expect(code).toBe(0);
  // No reset, no hang-up: only "nobody listens" after the drain began.
  expect(
    errors.filter((outcome) => outcome.error !== 'ECONNREFUSED'),
    JSON.stringify(errors),
  ).toEqual([]);
  expect(errors.every((outcome) => outcome.sentAt > signalledAt)).toBe(true);
  expect(answered.filter((outcome) => outcome.status !== 200 && outcome.status !== 201)).toEqual([]);
  // Every request sent once the drain had begun was answered with Connection: close.
  const late = answered.filter((outcome) => outcome.sentAt > drainingSeenAt);
  expect(late.filter((outcome) => outcome.connection !== 'close')).toEqual([]);
  expect(answered.filter((outcome) => outcome.sentAt > signalledAt).length).toBeGreaterThan(0);
}

describe('rowi serve, draining under keep-alive load', () => {
  it(
    'one process: SIGTERM amid back-to-back GET and POST on kept-alive connections; no request ends in a reset; every answer after the drain began says Connection: close; exit code 0',
    { timeout: 60_000 },
    async () => {
      await drainUnderLoad(1);
    },
  );

  it('two workers: the same, with SIGTERM to the primary', { timeout: 60_000 }, async () => {
    await drainUnderLoad(2);
  });
});
