import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../helpers/process.js';
import { eventually, Receiver } from '../helpers/receiver.js';
import { openSqliteFile } from '../helpers/sqlite-file.js';

/**
 * Credential changes × the webhook way of reading (docs/events.md "Who an endpoint acts for"): for
 * each change to an endpoint's owner, what the owner can no longer read stops reaching the
 * endpoint from the first event committed after the change, with the change made in another
 * process than the one that sends webhooks: `rowi serve --workers 2` on SQLite (the change is sent
 * to the worker that does not hold the dispatcher's lease), two instances on PostgreSQL (the change
 * is made on the second; the first, started first, holds the lease).
 */
const POSTGRES = process.env.ROWI_TEST_BACKEND === 'postgres';
const SETTINGS = {
  ROWI_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  ROWI_WEBHOOK_RETRY_SCHEDULE: '0.3,0.3',
  ROWI_WEBHOOK_TIMEOUT: '1000',
  ROWI_LOG_LEVEL: 'info',
};

let dispatching: RunningServer;
/** Where changes are made: never the process that sends webhooks. */
let changing: () => Promise<RunningServer>;
const servers: RunningServer[] = [];
const receivers: Receiver[] = [];
let sequence = 0;

beforeAll(async () => {
  dispatching = await startServer({ env: SETTINGS, ...(POSTGRES ? {} : { args: ['--workers', '2'] }) });
  servers.push(dispatching);
  if (POSTGRES) {
    const second = await startServer({ env: SETTINGS, database: dispatching.database, adminKey: dispatching.adminKey });
    servers.push(second);
    changing = async () => {
      expect(await leaseHolderPid(), 'the first instance sends webhooks').toBe(String(dispatching.child.pid));
      return second;
    };
  } else {
    changing = async () => dispatching;
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')));
  await Promise.all(receivers.map((receiver) => receiver.stop()));
});

/** One request on a connection of its own (so that --workers deals it to the next worker), with a request id to find it in the log by. */
function send(
  server: RunningServer,
  method: string,
  path: string,
  body?: unknown,
  key = server.adminKey,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; json: any; requestId: string }> {
  const requestId = `change-${process.pid}-${++sequence}`;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      `${server.baseUrl}${path}`,
      {
        method,
        agent: false,
        headers: {
          'x-api-key': key,
          'x-request-id': requestId,
          connection: 'close',
          ...(payload ? { 'content-type': 'application/json' } : {}),
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, json: text === '' ? undefined : JSON.parse(text), requestId }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

/** The worker (its cluster id) that logged the request, from the access log. */
function workerOf(server: RunningServer, requestId: string): number | undefined {
  const line = server
    .stdout()
    .split('\n')
    .find((text) => text.includes(`"reqId":"${requestId}"`) && text.includes('request completed'));
  return line === undefined ? undefined : (JSON.parse(line) as { worker: number }).worker;
}

/** The pid in the dispatcher's lease (PostgreSQL). */
async function leaseHolderPid(): Promise<string> {
  const client = new pg.Client({ connectionString: dispatching.database.ROWI_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ lease_owner: string }>(
      "select lease_owner from event_cursors where name = 'webhooks'",
    );
    return /:(\d+):[0-9a-f]+$/.exec(rows[0]!.lease_owner)![1]!;
  } finally {
    await client.end();
  }
}

/** The worker holding the dispatcher's lease: its pid from the lease (read from the SQLite file), its cluster id from its environment (NODE_UNIQUE_ID). */
async function dispatcherWorker(): Promise<number> {
  const file = await openSqliteFile(dispatching.dataFile);
  let pid: string;
  try {
    const row = file.get<{ lease_owner: string }>("select lease_owner from event_cursors where name = 'webhooks'");
    pid = /:(\d+):[0-9a-f]+$/.exec(row!.lease_owner)![1]!;
  } finally {
    file.close();
  }
  const children = execFileSync('ps', ['--ppid', String(dispatching.child.pid), '-o', 'pid='], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.trim());
  expect(children).toContain(pid);
  const environment = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  return Number(environment.find((entry) => entry.startsWith('NODE_UNIQUE_ID='))!.split('=')[1]);
}

/**
 * Makes the change on a process that does not send webhooks. With --workers 2 the primary deals
 * connections to the workers in turn: probes on connections of their own until one lands on the
 * dispatcher, then the change goes to the other.
 */
async function change(method: string, path: string, body?: unknown) {
  const server = await changing();
  if (!POSTGRES) {
    const dispatcher = await dispatcherWorker();
    for (let probe = 0; probe < 4; probe++) {
      const { requestId } = await send(server, 'GET', '/v1/callers?limit=1');
      const worker = await eventually(
        async () => workerOf(server, requestId),
        (id) => id !== undefined,
        5000,
      );
      if (worker === dispatcher) break;
    }
    const made = await send(server, method, path, body);
    const worker = await eventually(
      async () => workerOf(server, made.requestId),
      (id) => id !== undefined,
      5000,
    );
    expect(worker, 'the change was made by the worker that does not send webhooks').not.toBe(dispatcher);
    return made;
  }
  return send(server, method, path, body);
}

async function ownerWithEndpoint() {
  const caller = await send(dispatching, 'POST', '/v1/callers', {
    name: `owner-${process.pid}-${++sequence}`,
    role: 'admin',
  });
  const key = await send(dispatching, 'POST', `/v1/callers/${caller.json.id}/keys`, { description: 'owner' });
  const receiver = await new Receiver().start();
  receivers.push(receiver);
  const endpoint = await send(
    dispatching,
    'POST',
    '/v1/webhook-endpoints',
    { url: receiver.url, events: ['*'] },
    key.json.key,
  );
  expect([caller.status, key.status, endpoint.status]).toEqual([201, 201, 201]);
  return {
    callerId: caller.json.id as number,
    keyId: key.json.id as number,
    endpointId: endpoint.json.id as number,
    receiver,
  };
}

/** Produces one event of each watched kind: an order (orders), a caller (callers). */
async function produce(tag: string) {
  const user = await send(dispatching, 'POST', '/v1/users', {
    name: `Buyer ${tag}`,
    email: `buyer.${tag}.${process.pid}.${++sequence}@example.com`,
  });
  const item = await send(dispatching, 'POST', '/v1/items', {
    name: `Item ${tag}`,
    sku: `SKU-${tag}-${process.pid}-${sequence}`,
    price: '1.00',
  });
  await send(dispatching, 'PUT', `/v1/items/${item.json.id}/stock`, { quantity: 5 });
  await send(dispatching, 'POST', '/v1/orders', {
    name: `Order ${tag}`,
    user_id: user.json.id,
    lines: [{ item_id: item.json.id, quantity: 1 }],
  });
  await send(dispatching, 'POST', '/v1/callers', { name: `made-${tag}-${process.pid}-${sequence}`, role: 'reader' });
  // The marker, last: an endpoint's deliveries go in order, so what was to be sent before it has been.
  await send(dispatching, 'POST', '/v1/users', {
    name: `Marker ${tag}`,
    email: `marker.${tag}.${process.pid}.${sequence}@example.com`,
  });
}

/**
 * Waits until the endpoint has nothing pending: deliveries of different resources go in
 * parallel, so the marker may arrive before events committed ahead of it; once nothing is pending,
 * whatever was committed and would be sent has arrived.
 */
async function settled(endpointId: number): Promise<void> {
  await eventually(
    async () =>
      (await send(dispatching, 'GET', `/v1/webhook-endpoints/${endpointId}/deliveries?status=pending&limit=1`)).json,
    (body) => Array.isArray(body?.data) && body.data.length === 0,
    15_000,
  );
}

/** The types received from `from` on (an index into the receiver's deliveries). */
const typesFrom = (receiver: Receiver, from: number) =>
  new Set(receiver.received.slice(from).map((each) => each.event.type));

/** Events made and delivered before the change; returns where the receiver's deliveries after it start. */
async function before(receiver: Receiver, endpointId: number): Promise<number> {
  const from = receiver.received.length;
  await produce('before');
  await receiver.waitFor(1, 15_000, (each) => each.event.data.name === 'Marker before');
  await settled(endpointId);
  expect([...typesFrom(receiver, from)]).toEqual(expect.arrayContaining(['order.created', 'caller.created']));
  return receiver.received.length;
}

/** Events made after the change, and all of them that are sent delivered. */
async function after(receiver: Receiver, endpointId: number, from: number): Promise<Set<string>> {
  await produce('after');
  await receiver.waitFor(1, 15_000, (each) => each.event.data.name === 'Marker after');
  await settled(endpointId);
  return typesFrom(receiver, from);
}

describe(`webhooks × credential changes, the change made in another process (${POSTGRES ? 'two instances on PostgreSQL' : 'rowi serve --workers 2 on SQLite'})`, () => {
  it("the owner's key revoked (the owner still exists): its endpoint goes on receiving everything it may read", async () => {
    const { callerId, keyId, endpointId, receiver } = await ownerWithEndpoint();
    const from = await before(receiver, endpointId);
    expect((await change('DELETE', `/v1/callers/${callerId}/keys/${keyId}`)).status).toBe(204);
    expect([...(await after(receiver, endpointId, from))]).toEqual(
      expect.arrayContaining(['order.created', 'caller.created']),
    );
  }, 60_000);

  it("the owner's scopes narrowed (removed_scopes orders:read): no order event committed after the change reaches its endpoint; the rest does", async () => {
    const { callerId, endpointId, receiver } = await ownerWithEndpoint();
    const from = await before(receiver, endpointId);
    expect((await change('PATCH', `/v1/callers/${callerId}`, { removed_scopes: ['orders:read'] })).status).toBe(200);
    const types = await after(receiver, endpointId, from);
    expect([...types].filter((type) => type.startsWith('order.'))).toEqual([]);
    expect([...types]).toEqual(expect.arrayContaining(['caller.created', 'stock.changed']));
  }, 60_000);

  it("the owner's role changed (admin to reader, without callers:read): no caller event committed after the change reaches its endpoint; orders still do", async () => {
    const { callerId, endpointId, receiver } = await ownerWithEndpoint();
    const from = await before(receiver, endpointId);
    expect((await change('PATCH', `/v1/callers/${callerId}`, { role: 'reader' })).status).toBe(200);
    const types = await after(receiver, endpointId, from);
    expect([...types].filter((type) => type.startsWith('caller.') || type.startsWith('api_key.'))).toEqual([]);
    expect([...types]).toContain('order.created');
  }, 60_000);

  it('the owner deleted: its endpoint is disabled saying why, and nothing committed after the change reaches it', async () => {
    const { callerId, endpointId, receiver } = await ownerWithEndpoint();
    const delivered = await before(receiver, endpointId);
    expect((await change('DELETE', `/v1/callers/${callerId}`)).status).toBe(204);
    await produce('after');
    const endpoint = await eventually(
      async () => (await send(dispatching, 'GET', `/v1/webhook-endpoints/${endpointId}`)).json,
      (body) => body.enabled === false,
      15_000,
    );
    expect(endpoint.disabled_reason).toContain(`its owner, caller ${callerId}, no longer exists`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(receiver.received.slice(delivered).map((each) => each.event.type)).toEqual([]);
  }, 60_000);
});
