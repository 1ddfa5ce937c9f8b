import type { FastifyInstance } from 'fastify';
import type { RouteTable } from './not-allowed.js';

/**
 * A path that names a resource but for its trailing slash (`/v1/`, `/docs/`, `/v1/users/`) is
 * answered with a permanent redirect (308: the method and the body kept) to the path without it,
 * so that each resource has one URL (one cache entry, one ETag, one path in the audit trail).
 * Without this, a route with a parameter last (`/v1/users/:id`) took `/v1/users/` for a record with
 * an empty id (404), and `/v1/` found nothing. docs/conventions.md.
 */
export function registerTrailingSlashRedirect(app: FastifyInstance, routes: RouteTable): void {
  app.addHook('onRequest', (request, reply, done) => {
    const { url } = request;
    const query = url.indexOf('?');
    const end = query === -1 ? url.length : query;
    // The common case costs one look at one character.
    if (end <= 1 || url.charCodeAt(end - 1) !== 0x2f) return done();
    const path = url.slice(0, end);
    const bare = path.replace(/\/+$/, '');
    // Never `//host`, which a client would read as another origin.
    if (bare === '' || bare.startsWith('//') || routes.allowedMethods(path).length > 0) return done();
    if (routes.allowedMethods(bare).length === 0) return done();
    reply
      .code(308)
      .header('location', `${bare}${url.slice(end)}`)
      .send();
  });
}
