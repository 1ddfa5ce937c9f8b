import type { FastifyInstance, RouteOptions } from 'fastify';
import { BadRequestError } from '../errors.js';

/**
 * A route takes the query parameters its schema names and no other (docs/conventions.md):
 * a parameter it does not know is a mistake of the caller (a typo, `?mdoe=partial`, or a
 * parameter of another operation), and ignoring it would answer something else than was asked
 * (a backup for `?file=…`, every record for `?limt=10`). So, for every route as it is
 * registered, its query string schema is closed (additionalProperties: false), and a route
 * without one gets the empty one; the validator then refuses malformed values and unknown names
 * alike. The names are also checked as the request arrives, before its credentials are checked
 * or its body read: an upload of a large file with a misspelt option is refused at once.
 *
 * OPTIONS is left alone: a CORS preflight carries the query string of the request it asks about.
 */
type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Closes a route's query string schema, or gives it an empty one (run for every route as it is registered). */
export function closeQuerystring(route: RouteOptions): void {
  const methods = [route.method].flat();
  const schema = route.schema as Json | undefined;
  if (schema === undefined || methods.includes('OPTIONS')) return;
  const querystring = schema.querystring ?? { type: 'object', properties: {} };
  if (!isObject(querystring) || querystring.type !== 'object')
    throw new Error(
      `${String(route.method)} ${route.url}: a query string schema must be an object of named parameters`,
    );
  if (querystring.additionalProperties !== undefined && querystring.additionalProperties !== false)
    throw new Error(
      `${String(route.method)} ${route.url}: a query string schema may not take parameters it does not name`,
    );
  querystring.additionalProperties = false;
  schema.querystring = querystring;
}

/** 400 invalid-query, before anything else of the route runs, for a query parameter the route does not name. */
export function registerQueryNameCheck(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.url.indexOf('?') === -1 || request.method === 'OPTIONS') return done();
    const querystring = request.routeOptions.schema?.querystring as { properties?: Json } | undefined;
    if (querystring === undefined) return done();
    const known = Object.keys(querystring.properties ?? {});
    const unknown = Object.keys(request.query as Json).find((name) => !known.includes(name));
    if (unknown === undefined) return done();
    const detail = `is not a known query parameter; ${known.length === 0 ? 'this operation takes none' : `this operation takes ${known.join(', ')}`}`;
    done(
      new BadRequestError(
        `Query parameter ${unknown} ${detail}.`,
        [{ in: 'query', pointer: `#/${unknown.replace(/~/g, '~0').replace(/\//g, '~1')}`, detail }],
        'invalid-query',
      ),
    );
  });
}
