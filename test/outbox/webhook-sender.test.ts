import { lookup } from 'node:dns';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AddressPolicy, type Resolver } from '../../src/outbox/ssrf.js';
import { WebhookSender } from '../../src/outbox/webhook-sender.js';
import { tempFolder } from '../helpers/temp.js';
import { makeCertificates } from '../helpers/tls.js';

/**
 * The webhook sender on its own (src/outbox/webhook-sender.ts), against receivers on loopback:
 * where its connections go, when they are kept and closed, and what an answer counts as. What a
 * delivery's attempts come to through the dispatcher is in webhooks.test.ts.
 */

/**
 * A name that resolves to loopback, whatever the machine's resolver says: the policy resolves it
 * (src/outbox/ssrf.ts); a connection that looked it up by itself would find no such host.
 */
const LOOPBACK_NAME = 'hooks.resolves-to-loopback.test';
const resolveLoopbackName: Resolver = (hostname, options, callback) =>
  hostname === LOOPBACK_NAME
    ? process.nextTick(() => callback(null, [{ address: '127.0.0.1', family: 4 }]))
    : lookup(hostname, options, callback);

const BODY = JSON.stringify({ id: 'evt_1', type: 'user.created', data: { id: 1 } });

/** A receiver whose connections (their server side) are kept, each with whether rowi ended it. */
interface TestReceiver {
  server: Server;
  port: number;
  connections: { socket: Socket; endedByRowi: boolean; closed: Promise<void> }[];
}

const servers: Server[] = [];
const senders: WebhookSender[] = [];
afterEach(async () => {
  await Promise.all(senders.splice(0).map((sender) => sender.close()));
  for (const server of servers.splice(0)) server.closeAllConnections();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

async function receiver(
  handle: (request: IncomingMessage, response: ServerResponse) => void,
  server: Server = createServer(),
): Promise<TestReceiver> {
  const started: TestReceiver = { server, port: 0, connections: [] };
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on('end', () => handle(request, response));
  });
  server.on('connection', (socket: Socket) => {
    const connection = {
      socket,
      endedByRowi: false,
      closed: new Promise<void>((resolve) => socket.on('close', () => resolve())),
    };
    // A FIN from rowi's side: the receiver itself never ends a connection here.
    socket.on('end', () => (connection.endedByRowi = true));
    started.connections.push(connection);
  });
  // Keeps idle connections far longer than rowi does: what closes one early is rowi.
  server.keepAliveTimeout = 60_000;
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  started.port = (server.address() as AddressInfo).port;
  return started;
}

function sender(allowHosts = '127.0.0.1', timeoutMs = 5000): WebhookSender {
  const policy = new AddressPolicy(allowHosts, resolveLoopbackName);
  const made = new WebhookSender({ policy, timeoutMs, userAgent: 'rowi-test' });
  senders.push(made);
  return made;
}

const send = (to: WebhookSender, url: string) => to.send(url, BODY, { 'webhook-id': 'msg_1' });

describe('webhook sender: where connections go', () => {
  it('a name that resolves to a loopback address when rowi connects: not sent, saying why, and the receiver gets no connection', async () => {
    const target = await receiver((_request, response) => response.writeHead(204).end());
    const outcome = await send(sender(''), `https://${LOOPBACK_NAME}:${target.port}/hooks`);
    expect(outcome).toMatchObject({ ok: false, statusCode: null });
    expect(outcome.error).toBe(
      `${LOOPBACK_NAME} resolves to 127.0.0.1, a loopback address; not sent (ROWI_WEBHOOK_ALLOW_HOSTS)`,
    );
    expect(target.connections).toHaveLength(0);
  });

  it('https to the address the look-up checked and allowed: the certificate is verified (a CA no one trusts fails the attempt, nothing is posted)', async () => {
    const certificates = makeCertificates(tempFolder('webhook-tls-'));
    let posted = 0;
    const target = await receiver(
      () => posted++,
      createTlsServer({ cert: readFileSync(certificates.cert), key: readFileSync(certificates.key) }),
    );
    const outcome = await send(sender('127.0.0.0/8'), `https://${LOOPBACK_NAME}:${target.port}/hooks`);
    expect(outcome).toMatchObject({ ok: false, statusCode: null });
    expect(outcome.error).toMatch(/certificate/);
    expect(target.connections).toHaveLength(1);
    expect(posted).toBe(0);
  });

  it('endpoints that share a receiver: 24 deliveries it never answers (more than ROWI_WEBHOOK_CONCURRENCY) do not hold up another one to it', async () => {
    const target = await receiver((request, response) => {
      if (request.url === '/ok') response.writeHead(204).end();
    });
    const to = sender();
    const hung = Array.from({ length: 24 }, () => send(to, `http://127.0.0.1:${target.port}/hangs`));
    let hungEnded = false;
    void Promise.all(hung).then(() => (hungEnded = true));
    const outcome = await send(to, `http://127.0.0.1:${target.port}/ok`);
    expect(outcome).toMatchObject({ ok: true, statusCode: 204, error: null });
    expect(hungEnded).toBe(false);
    expect(target.connections).toHaveLength(25);
    target.server.closeAllConnections();
    expect((await Promise.all(hung)).map((ended) => ended.error)).toEqual(
      hung.map(() => 'connection closed by the receiver before it answered'),
    );
  });
});

describe('webhook sender: kept connections', () => {
  it('an idle kept connection is closed by rowi after 2 s (the receiver would keep it a minute); the next delivery connects anew', async () => {
    const target = await receiver((_request, response) => response.writeHead(204).end());
    // Each answer ends its attempt at once, not at the time-out (a minute: past the test's own).
    const to = sender('127.0.0.1', 60_000);
    expect((await send(to, `http://127.0.0.1:${target.port}/hooks`)).ok).toBe(true);
    expect((await send(to, `http://127.0.0.1:${target.port}/hooks`)).ok).toBe(true);
    expect(target.connections).toHaveLength(1);
    await target.connections[0]!.closed;
    expect(target.connections[0]!.endedByRowi).toBe(true);
    expect((await send(to, `http://127.0.0.1:${target.port}/hooks`)).ok).toBe(true);
    expect(target.connections).toHaveLength(2);
  });

  it('close(): every kept connection is closed', async () => {
    const target = await receiver((_request, response) => response.writeHead(204).end());
    const to = sender();
    await Promise.all([1, 2, 3].map(() => send(to, `http://127.0.0.1:${target.port}/hooks`)));
    expect(target.connections).toHaveLength(3);
    await to.close();
    await Promise.all(target.connections.map((connection) => connection.closed));
    expect(target.connections.map((connection) => connection.endedByRowi)).toEqual([true, true, true]);
  });
});

describe('webhook sender: what an answer counts as', () => {
  it('an answer whose body does not end within the time-out counts by its status; its connection is closed', async () => {
    const target = await receiver((_request, response) => response.writeHead(200).write('{"partial":'));
    const outcome = await send(sender('127.0.0.1', 300), `http://127.0.0.1:${target.port}/hooks`);
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, error: null });
    await target.connections[0]!.closed;
  });

  it('an answer whose body trickles (a byte every 100 ms, for ever): counted by its status about a second after its headers, not at the 10 s time-out; its connection closed', async () => {
    const target = await receiver((_request, response) => {
      response.writeHead(200).write('{');
      const trickle = setInterval(() => response.write(' '), 100);
      response.on('close', () => clearInterval(trickle));
    });
    const outcome = await send(sender('127.0.0.1', 10_000), `http://127.0.0.1:${target.port}/hooks`);
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, error: null });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(900);
    expect(outcome.durationMs).toBeLessThan(2000);
    await target.connections[0]!.closed;
  });

  it('an answer longer than 4 KiB, which would go on for ever: read up to 4 KiB and dropped, counted by its status at once (not at the time-out), its connection closed', async () => {
    const target = await receiver((_request, response) => {
      response.writeHead(500);
      const more = () => {
        while (response.write('x'.repeat(1024)));
        response.once('drain', more);
      };
      more();
    });
    const outcome = await send(sender('127.0.0.1', 60_000), `http://127.0.0.1:${target.port}/hooks`);
    expect(outcome).toMatchObject({ ok: false, statusCode: 500, error: 'answered 500' });
    await target.connections[0]!.closed;
  });

  it('the request as sent: a POST of the body, its content type and length, the signature headers and the user agent', async () => {
    let seen: IncomingMessage | undefined;
    const target = await receiver((request, response) => {
      seen = request;
      response.writeHead(204).end();
    });
    await send(sender(), `http://127.0.0.1:${target.port}/hooks?source=rowi`);
    expect(seen).toMatchObject({ method: 'POST', url: '/hooks?source=rowi' });
    expect(seen!.headers).toMatchObject({
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(BODY)),
      'user-agent': 'rowi-test',
      'webhook-id': 'msg_1',
      host: `127.0.0.1:${target.port}`,
    });
  });
});
