import { Server as NetServer, type Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/config.js';
import { AppError } from '../errors.js';
import { isProbe } from './probes.js';

/**
 * Graceful drain, when the app closes (SIGTERM, SIGINT, a worker told to stop): no request that
 * reached rowi ends in a reset.
 *
 * 1. No new connection is accepted (the listening socket closes; open connections stay).
 * 2. Requests in flight finish, and requests that arrive on open connections are served; every
 *    response from then on says `Connection: close`, so each client closes its connection after
 *    its answer instead of sending another request on it. Health probes answer 503 instead, so
 *    that load balancers stop sending traffic here.
 * 3. A connection with nothing in progress is closed only once it has been quiet for a moment
 *    (QUIET_MS: no request in flight, no byte received). Closing an idle keep-alive connection
 *    races with a request the client may be sending on it at that instant, which then meets a
 *    reset: Node's own http.Server.close() closes idle connections at once, and cut 2–16 requests
 *    under keep-alive load. A client that sends requests back to back is never quiet that long: it
 *    gets its next answer with `Connection: close` instead.
 *    Event streams, which never end by themselves, are ended at once (their clients reconnect
 *    elsewhere and resume with Last-Event-ID); a stream whose client does not read its end is
 *    reset within a second, so it never holds the drain until the time-out.
 * 4. The app's other closing work (the audit trail's last batch, the database) waits until every
 *    connection has ended, or ROWI_SHUTDOWN_TIMEOUT has passed: then what is left is cut, and the
 *    drain reports it (the process exits 1).
 */
const QUIET_MS = 1000;
const CHECK_EVERY_MS = 20;

interface Tracked {
  requests: number;
  bytesRead: number;
  quietSince: number;
  ending: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** How the last drain ended: undefined until the app closes; false when connections were cut. */
    drainedCleanly: boolean | undefined;
    /**
     * Responses that never end by themselves (an event stream): the drain calls `end` on each
     * first, so that they finish cleanly instead of holding the shutdown until its time-out.
     */
    openStreams: Set<{ end(): void }>;
  }
}

export function registerDraining(app: FastifyInstance, config: Pick<Config, 'shutdownTimeout'>): void {
  let draining = false;
  const connections = new Map<Socket, Tracked>();
  const server = app.server;
  app.decorate('drainedCleanly', undefined);
  app.decorate('openStreams', new Set<{ end(): void }>());

  // With TLS the request's socket is the TLS socket, which 'secureConnection' hands over.
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    connections.set(socket, { requests: 0, bytesRead: 0, quietSince: performance.now(), ending: false });
    socket.once('close', () => connections.delete(socket));
  });
  server.on(
    'request',
    (request: { socket: Socket }, response: { once(event: 'close', listener: () => void): void }) => {
      const tracked = connections.get(request.socket);
      if (tracked === undefined) return;
      tracked.requests++;
      response.once('close', () => {
        tracked.requests--;
        tracked.quietSince = performance.now();
      });
    },
  );

  app.addHook('onRequest', (request, _reply, done) => {
    if (draining && isProbe(request)) {
      done(
        new AppError('service-unavailable', 'This rowi instance is shutting down; send traffic elsewhere.', {
          headers: { 'retry-after': '1' },
        }),
      );
      return;
    }
    done();
  });
  // Every answer given while draining ends its connection, the ones already in progress included.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('preClose', async () => {
    draining = true;
    app.log.info('draining: every answer from now on says Connection: close');
    for (const stream of app.openStreams) stream.end();
    // net.Server's close, not http.Server's: that one would also close idle connections at once.
    if (server.listening) Reflect.apply(NetServer.prototype.close, server, []);
    app.drainedCleanly = await drain(connections, config.shutdownTimeout);
    if (!app.drainedCleanly)
      app.log.error(
        { shutdown_timeout_ms: config.shutdownTimeout },
        'connections were still busy when the shutdown time-out ran out: they were cut',
      );
  });
}

/** Waits until every connection has ended, closing quiet ones; true unless some had to be cut at the deadline. */
async function drain(connections: Map<Socket, Tracked>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (connections.size > 0) {
    const now = performance.now();
    if (now >= deadline) {
      const busy = [...connections.values()].some((tracked) => tracked.requests > 0);
      for (const socket of connections.keys()) socket.destroy();
      return !busy;
    }
    for (const [socket, tracked] of connections) {
      if (tracked.requests > 0 || socket.bytesRead !== tracked.bytesRead) {
        tracked.bytesRead = socket.bytesRead;
        tracked.quietSince = now;
      } else if (!tracked.ending && now - tracked.quietSince >= QUIET_MS) {
        // A FIN, after anything still being written: the client sees the connection end cleanly.
        tracked.ending = true;
        socket.end();
      } else if (tracked.ending && now - tracked.quietSince >= 2 * QUIET_MS) {
        // The client did not close its side in time: nothing is in flight on it, so it can go.
        socket.destroy();
      }
    }
    await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
  }
  return true;
}
