import type { RouteOptions } from 'fastify';

/**
 * Fastify answers a method that a path does not support with 404. rowi's contract (docs/guide.md "Conventions") wants
 * 405 with an Allow header listing the methods the path does support, and OPTIONS answered with
 * that list. Every route is recorded here as it is registered, so the list cannot go stale.
 */
export class RouteTable {
  readonly #routes: { method: string; url: string; pattern: RegExp }[] = [];

  /** OPTIONS routes are left out: every path answers OPTIONS (and CORS adds one for all paths). */
  add(route: Pick<RouteOptions, 'method' | 'url'>): void {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods)
      if (method !== 'OPTIONS') this.#routes.push({ method, url: route.url, pattern: toPattern(route.url) });
  }

  /** Every registered (method, url) pair, e.g. for checking the OpenAPI document. */
  list(): { method: string; url: string }[] {
    return this.#routes.map(({ method, url }) => ({ method, url }));
  }

  /** Methods registered for a concrete path, in a stable order; empty when no route matches. */
  allowedMethods(path: string): string[] {
    const methods = new Set(this.#routes.filter((route) => route.pattern.test(path)).map((route) => route.method));
    if (methods.size > 0) methods.add('OPTIONS');
    return METHOD_ORDER.filter((method) => methods.has(method));
  }
}

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

function toPattern(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) =>
      segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${source}$`);
}
