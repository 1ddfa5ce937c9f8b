import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';

/**
 * While the server closes, requests still arriving on open keep-alive connections are refused
 * with a 503 problem (Retry-After, and Fastify adds Connection: close) instead of starting work
 * that shutdown might cut short; requests already in flight finish normally. This replaces
 * Fastify's own 503 body, which is not an RFC 9457 problem.
 */
export function registerDraining(app: FastifyInstance): void {
  let draining = false;
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!draining) {
      done();
      return;
    }
    done(new AppError('service-unavailable', 'This rowi instance is shutting down; retry the request (on another instance, or here in a moment).', { headers: { 'retry-after': '1' } }));
  });
}
