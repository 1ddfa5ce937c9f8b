import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RouteTable } from './not-allowed.js';
import { pathOf } from './problem.js';

/** Request headers a browser may send to rowi besides the CORS-safelisted ones. */
const ALLOWED_HEADERS = [
  'Authorization',
  'X-API-Key',
  'Content-Type',
  'Accept',
  'If-Match',
  'If-None-Match',
  'Idempotency-Key',
  'X-Request-Id',
  'traceparent',
  'tracestate',
  'Last-Event-ID',
];

/** Response headers a browser's script may read besides the CORS-safelisted ones. */
const EXPOSED_HEADERS = [
  'ETag',
  'Location',
  'Link',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'WWW-Authenticate',
  'X-Request-Id',
  'traceresponse',
  'Deprecation',
  'Sunset',
  'Allow',
];

/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours). */
const PREFLIGHT_MAX_AGE_S = 7200;

/**
 * CORS for browser callers, with @fastify/cors, when ROWI_CORS_ORIGINS names origins (or `*`);
 * without it rowi sends no CORS header and browsers keep other sites' scripts out.
 *
 * A request from an allowed origin gets Access-Control-Allow-Origin (that origin, never a
 * wildcard unless `*` is the setting) and the headers it may read. A preflight (OPTIONS with
 * Origin and Access-Control-Request-Method) is answered 204 with the methods of that path and
 * cached for 2 hours; one for a path rowi does not have, or from an origin not allowed, gets no
 * CORS headers and is answered as any OPTIONS is (204 with Allow, or 404), which the browser
 * reads as a refusal. No credentials mode: rowi's credentials are headers, not cookies.
 */
export async function registerCors(app: FastifyInstance, setting: string, routes: RouteTable): Promise<void> {
  if (setting === '') return;
  const any = setting === '*';
  const allowed = new Set(setting.split(',').map((origin) => origin.toLowerCase()));
  const optionsFor = (request: FastifyRequest): FastifyCorsOptions => {
    const origin = request.headers.origin;
    if (origin === undefined || (!any && !allowed.has(origin.toLowerCase()))) return { origin: false };
    const common = { origin: any ? '*' : origin, exposedHeaders: EXPOSED_HEADERS };
    if (request.method !== 'OPTIONS' || request.headers['access-control-request-method'] === undefined)
      return { ...common, preflight: false };
    const methods = routes.allowedMethods(pathOf(request));
    if (methods.length === 0) return { origin: false };
    return { ...common, methods, allowedHeaders: ALLOWED_HEADERS, maxAge: PREFLIGHT_MAX_AGE_S, strictPreflight: true };
  };
  await app.register(cors, {
    hook: 'onRequest',
    delegator: (request: FastifyRequest, callback: (error: Error | null, options: FastifyCorsOptions) => void) =>
      callback(null, optionsFor(request)),
  });
}
