import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';

/** A caller's X-Request-Id is kept when sane: 1–128 characters of a conservative set. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._~:@/+=-]{1,128}$/;

/** Fastify's genReqId: the caller's id when sane (so traces join up), else a new UUID. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

/** Every response, errors included, carries the request id (README "Conventions"). */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
}
