import type { FastifyInstance, FastifyRequest } from 'fastify';
import { metrics, secondsSince } from '../metrics.js';

type Observer = { observe(seconds: number): void };
/** The histogram's child for each route, method and status class: observing through it skips hashing the labels each time. */
const observers = new Map<string, Observer>();
const observerOf = (route: string, method: string, statusClass: string): Observer => {
  const key = `${route} ${method} ${statusClass}`;
  let observer = observers.get(key);
  if (observer === undefined) observers.set(key, (observer = metrics.requestDuration.labels(route, method, statusClass)));
  return observer;
};

/** Route templates as the OpenAPI document writes them (/v1/users/{id}), cached per template. */
const templates = new Map<string, string>();
const templateOf = (request: FastifyRequest): string => {
  const url = request.routeOptions.url;
  // No route: an unknown path (404) or a refusal before routing; one label for all of them.
  if (url === undefined) return 'unmatched';
  let template = templates.get(url);
  if (template === undefined) templates.set(url, (template = url.replace(/:([A-Za-z_]+)/g, '{$1}')));
  return template;
};

/**
 * Every request is timed and counted in flight, from its arrival until its response is done or
 * its connection is gone (the raw response's close fires once, either way), by route template,
 * method and status class (2xx, 4xx…).
 */
export function registerRequestMetrics(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const start = process.hrtime.bigint();
    metrics.requestsInFlight.inc();
    reply.raw.once('close', () => {
      metrics.requestsInFlight.dec();
      const status = reply.raw.headersSent ? reply.statusCode : 499;
      observerOf(templateOf(request), request.method, `${Math.floor(status / 100)}xx`).observe(secondsSince(start));
    });
    done();
  });
}
