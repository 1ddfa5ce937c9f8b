import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';

/**
 * A lingering close (as nginx's lingering_close): when rowi answers before it has read the whole
 * request body (413 for a body past the limit, or any answer given early), Node's HTTP server ends
 * the connection at once with the client's bytes still arriving, and the kernel answers those
 * bytes with a reset, which can destroy the answer before the client has read it: a client
 * sending a large body would see "connection reset" instead of the 413 that says why. Here such a
 * connection is half-closed instead (the answer, then FIN), what still arrives is read and
 * discarded, and the connection is closed when the client has finished sending, or after
 * LINGER_MS at the latest, so a client that keeps sending cannot hold it open.
 */
const LINGER_MS = 2000;

export function registerLingeringClose(app: FastifyInstance): void {
  const server = app.server;
  const current = new WeakMap<Socket, { complete: boolean }>();
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    const destroySoon = socket.destroySoon;
    // Node's HTTP server calls destroySoon when it ends a connection after an answer.
    socket.destroySoon = function lingerIfUnread(this: Socket) {
      const request = current.get(this);
      if (request === undefined || request.complete || this.destroyed) return destroySoon.call(this);
      linger(this);
    };
  });
  server.on('request', (request: { socket: Socket; complete: boolean }) => current.set(request.socket, request));
}

function linger(socket: Socket): void {
  const close = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  socket.once('end', close);
  socket.once('close', () => clearTimeout(timer));
  // The answer goes out first, then FIN; reading goes on (and the HTTP parser discards the rest of the body).
  socket.end();
  socket.resume();
}
