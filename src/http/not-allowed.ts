import type { FastifyInstance, RouteOptions } from 'fastify';
import { MethodNotAllowedError } from '../errors.js';
import { BOTH_FORMATS, chooseFormat } from './negotiate.js';

/**
 * Fastify answers a method that a path does not support with 404. rowi's contract (docs/conventions.md) wants
 * 405 with an Allow header listing the methods the path does support, and OPTIONS answered with
 * that list. Every route is recorded here as it is registered, so the list cannot go stale.
 *
 * A path belongs to the most specific route pattern that matches it, as the router reads it: at
 * each segment, from the left, a literal segment outranks a parameter, which outranks a wildcard.
 * `/v1/users/batch` is the batch's path (POST), not a user named "batch": its Allow lists POST
 * only, and a GET of it is 405, although the router, which keeps a tree per method, would hand a
 * GET of it to `/v1/users/:id` (registerShadowedRoutes answers that 405).
 */
interface Route {
  method: string;
  url: string;
  pattern: RegExp;
  rank: readonly number[];
}

export class RouteTable {
  readonly #routes: Route[] = [];
  /** The routes that outrank a parametric route on some of its paths, by its url; filled on first use. */
  readonly #rivals = new Map<string, Route[]>();

  /** OPTIONS routes are left out: every path answers OPTIONS (and CORS adds one for all paths). */
  add(route: Pick<RouteOptions, 'method' | 'url'>): void {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods)
      if (method !== 'OPTIONS')
        this.#routes.push({ method, url: route.url, pattern: toPattern(route.url), rank: rankOf(route.url) });
    this.#rivals.clear();
  }

  /** Every registered (method, url) pair, e.g. for checking the OpenAPI document. */
  list(): { method: string; url: string }[] {
    return this.#routes.map(({ method, url }) => ({ method, url }));
  }

  /** Methods of the route pattern a concrete path belongs to, in a stable order; empty when no route matches. */
  allowedMethods(path: string): string[] {
    const matching = this.#routes.filter((route) => route.pattern.test(path));
    if (matching.length === 0) return [];
    const best = matching.reduce((top, route) => (compareRanks(route.rank, top.rank) > 0 ? route : top)).rank;
    const methods = new Set(
      matching.filter((route) => compareRanks(route.rank, best) === 0).map((route) => route.method),
    );
    methods.add('OPTIONS');
    return METHOD_ORDER.filter((method) => methods.has(method));
  }

  /**
   * Whether `path`, which the router gave to the route registered at `url`, belongs to a more
   * specific route pattern (which does not serve the request's method). Costs a test of the few
   * patterns that outrank `url` on some path (none for most routes).
   */
  isShadowed(url: string, path: string): boolean {
    let rivals = this.#rivals.get(url);
    if (rivals === undefined) {
      const rank = rankOf(url);
      rivals = this.#routes.filter(
        (route) =>
          route.url !== url &&
          (route.rank.length === rank.length || route.rank.includes(WILDCARD)) &&
          compareRanks(route.rank, rank) > 0,
      );
      this.#rivals.set(url, rivals);
    }
    return rivals.some((route) => route.pattern.test(path));
  }
}

/**
 * 405 for a request the router gave to a route whose pattern another, more specific one outranks
 * on this path (GET /v1/users/batch, PATCH /v1/users/me): the path serves only the other's
 * methods. Answered before anything else of the route runs: credentials, negotiation, the body.
 */
export function registerShadowedRoutes(app: FastifyInstance, routes: RouteTable): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const url = request.routeOptions.url;
    if (url === undefined || !url.includes(':') || request.method === 'OPTIONS') return done();
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    if (!routes.isShadowed(url, path)) return done();
    request.format = chooseFormat(request.headers.accept, BOTH_FORMATS) ?? 'json';
    done(new MethodNotAllowedError(request.method, path, routes.allowedMethods(path)));
  });
}

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

const LITERAL = 2;
const PARAMETER = 1;
const WILDCARD = 0;

/** How specific each segment of a route pattern is: a literal, a parameter or a wildcard. */
function rankOf(url: string): number[] {
  return url.split('/').map((segment) => (segment === '*' ? WILDCARD : segment.startsWith(':') ? PARAMETER : LITERAL));
}

/** Which of two patterns the router prefers: the one with a more specific segment first, from the left. */
function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let index = 0; index < Math.min(a.length, b.length); index++)
    if (a[index] !== b[index]) return a[index]! - b[index]!;
  return a.length - b.length;
}

function toPattern(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) =>
      segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${source}$`);
}
