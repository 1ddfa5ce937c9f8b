import { afterEach, describe, expect, it } from 'vitest';
import { callServer, serverPool, type RunningServer } from '../helpers/process.js';
import { SseClient } from '../helpers/sse.js';

/**
 * A change to a caller or its key reaches the open event streams of every process within the
 * bound requests have (docs/security.md: at once where it was made, within 1 s elsewhere): the
 * workers of `rowi serve --workers 2` on SQLite (the primary relays the signal), and two instances
 * on one PostgreSQL database (LISTEN/NOTIFY). One process's matrix: credential-changes.test.ts.
 */
const POSTGRES = process.env.ROWI_TEST_BACKEND === 'postgres';
const BOUND_MS = 1000;
const servers = serverPool();
afterEach(() => servers.killAll());

const api = callServer;

/** Streams opened on new connections, in turn on each server: with workers, connections go to them in turn. */
async function openStreams(
  where: RunningServer[],
  headers: Record<string, string>,
  count: number,
): Promise<SseClient[]> {
  const streams: SseClient[] = [];
  for (let index = 0; index < count; index++)
    streams.push(await SseClient.open(`${where[index % where.length]!.baseUrl}/v1/events/stream`, headers));
  expect(streams.map((stream) => stream.response.statusCode)).toEqual(streams.map(() => 200));
  return streams;
}

/** The processes (pid, or worker id) that logged ending a stream. */
function enders(servers: RunningServer[]): Set<string> {
  const found = new Set<string>();
  for (const server of servers) {
    for (const line of server.stdout().split('\n')) {
      if (!line.includes('event stream ended by the server')) continue;
      const entry = JSON.parse(line) as { pid?: number; worker?: number };
      found.add(`${server.baseUrl}#${entry.worker ?? entry.pid ?? 0}`);
    }
  }
  return found;
}

const deployments = [
  {
    name: 'rowi serve --workers 2 on SQLite',
    skip: POSTGRES,
    // A loaded machine may take long to start two workers.
    start: async () => [await servers.serve({ args: ['--workers', '2'], timeoutMs: 60_000 })],
  },
  {
    name: 'two instances on one PostgreSQL database',
    skip: !POSTGRES,
    start: async () => {
      // One issuer for both, as behind one load balancer: a token of either is good on the other.
      const env = { ROWI_PUBLIC_URL: 'https://rowi.test' };
      const first = await servers.serve({ env });
      return [first, await servers.serve({ env, database: first.database, adminKey: first.adminKey })];
    },
  },
];

describe('a change to a caller or its key, on every process', () => {
  for (const deployment of deployments) {
    it.skipIf(deployment.skip)(
      `GET /v1/events/stream: every stream of a revoked key ends (401), every stream of a narrowed token stops sending orders, and of a deleted caller ends (401), within ${BOUND_MS} ms on every process (${deployment.name})`,
      { timeout: 90_000 },
      async () => {
        const running = await deployment.start();
        const [first] = running as [RunningServer];
        const caller = await api(first, 'POST', '/v1/callers', { name: 'dashboard', role: 'reader' });
        const key = await api(first, 'POST', `/v1/callers/${caller.json.id}/keys`, {});
        const token = await fetch(`${first.baseUrl}/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({
            grant_type: 'client_credentials',
            client_id: 'dashboard',
            client_secret: key.json.key,
          }).toString(),
        }).then((reply) => reply.json() as Promise<{ access_token: string }>);
        const byKey = await openStreams(running, { 'x-api-key': key.json.key }, 4);
        const byToken = await openStreams(running, { authorization: `Bearer ${token.access_token}` }, 4);

        // The key is revoked through the first server: its streams end everywhere, the token's go on.
        expect((await api(first, 'DELETE', `/v1/callers/${caller.json.id}/keys/${key.json.id}`)).status).toBe(204);
        const revokedAt = Date.now();
        const closed = await Promise.all(byKey.map((stream) => stream.waitForClose(5000)));
        expect(Date.now() - revokedAt).toBeLessThanOrEqual(BOUND_MS);
        expect(closed).toEqual(byKey.map(() => true));
        for (const stream of byKey)
          expect(stream.endedWith).toMatchObject({
            status: 401,
            type: '/problems/invalid-credentials',
            detail: 'The API key has been revoked.',
          });
        // Every process had a stream of it, and ended it.
        expect(enders(running).size).toBe(2);

        // orders:read removed: a second later no token stream sends an order, and every one goes on.
        const user = await api(first, 'POST', '/v1/users', {
          name: 'Buyer',
          email: `buyer.${process.pid}@example.com`,
        });
        const item = await api(first, 'POST', '/v1/items', { name: 'Widget', sku: `W-${process.pid}`, price: '1.00' });
        expect((await api(first, 'PUT', `/v1/items/${item.json.id}/stock`, { quantity: 10 })).status).toBe(200);
        expect(
          (
            await api(
              first,
              'PATCH',
              `/v1/callers/${caller.json.id}`,
              { removed_scopes: ['orders:read'] },
              'application/merge-patch+json',
            )
          ).status,
        ).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, BOUND_MS));
        const order = await api(running.at(-1)!, 'POST', '/v1/orders', {
          name: 'Unseen',
          user_id: user.json.id,
          lines: [{ item_id: item.json.id, quantity: 1 }],
        });
        expect(order.status).toBe(201);
        const marker = await api(running.at(-1)!, 'POST', '/v1/users', {
          name: 'Marker',
          email: `marker.${process.pid}@example.com`,
        });
        for (const stream of byToken) {
          expect(
            await stream.waitUntil((event) => event.event === 'user.created' && event.data.data.id === marker.json.id),
          ).toBe(true);
          expect(stream.events.filter((event) => event.event === 'order.created')).toEqual([]);
        }

        // The caller is deleted: its token's streams end everywhere.
        expect((await api(first, 'DELETE', `/v1/callers/${caller.json.id}`)).status).toBe(204);
        const deletedAt = Date.now();
        const ended = await Promise.all(byToken.map((stream) => stream.waitForClose(5000)));
        expect(Date.now() - deletedAt).toBeLessThanOrEqual(BOUND_MS);
        expect(ended).toEqual(byToken.map(() => true));
        for (const stream of byToken)
          expect(stream.endedWith).toMatchObject({ status: 401, type: '/problems/invalid-credentials' });
      },
    );

    it.skipIf(deployment.skip)(
      `GET /v1/users: a key in use on every process, revoked through one, is 401 on every process within ${BOUND_MS} ms (${deployment.name})`,
      { timeout: 90_000 },
      async () => {
        const running = await deployment.start();
        const [first] = running as [RunningServer];
        const caller = await api(first, 'POST', '/v1/callers', { name: 'poller', role: 'reader' });
        const key = await api(first, 'POST', `/v1/callers/${caller.json.id}/keys`, {});
        // A new connection each time: with workers, each goes to the next worker in turn.
        const read = (server: RunningServer) =>
          fetch(`${server.baseUrl}/v1/users?limit=1`, {
            headers: { 'x-api-key': key.json.key, connection: 'close' },
          }).then(async (reply) => {
            await reply.arrayBuffer();
            return reply.status;
          });
        // Every process has checked the key and believes it (its cache is warm).
        for (let round = 0; round < 4; round++)
          expect(await Promise.all(running.map((server) => read(server)))).toEqual(running.map(() => 200));

        expect((await api(first, 'DELETE', `/v1/callers/${caller.json.id}/keys/${key.json.id}`)).status).toBe(204);
        const revokedAt = Date.now();
        // Each process in turn, until every one of a round refuses it.
        let refusedEverywhereAt: number | undefined;
        while (refusedEverywhereAt === undefined && Date.now() - revokedAt < 5000) {
          const statuses = await Promise.all(running.flatMap((server) => [read(server), read(server)]));
          if (statuses.every((status) => status === 401)) refusedEverywhereAt = Date.now();
        }
        expect(refusedEverywhereAt).toBeDefined();
        expect(refusedEverywhereAt! - revokedAt).toBeLessThanOrEqual(BOUND_MS);
        // And it stays refused.
        expect(await Promise.all(running.map((server) => read(server)))).toEqual(running.map(() => 401));
      },
    );
  }
});
