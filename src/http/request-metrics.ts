import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { inFlight, metrics } from '../observability/metrics.js';
import type { Series } from '../observability/metrics-histogram.js';

/** The duration series of each route, method and status class, found by one lookup per request. */
const seriesTable = new Map<string, Series>();
const seriesOf = (route: string, method: string, statusClass: string): Series => {
  const key = `${route} ${method} ${statusClass}`;
  let series = seriesTable.get(key);
  if (series === undefined) seriesTable.set(key, (series = metrics.requestDuration.series(route, method, statusClass)));
  return series;
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

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/**
 * A request whose connection closed before its answer was sent whole (the client gave up, or sent
 * half a body and left): Fastify's onResponse never runs for it. `status` is 499 (nginx's "client
 * closed request") when no answer had begun, else the answer's.
 */
export type AbandonedRequest = (request: FastifyRequest, reply: FastifyReply, status: number) => void;

/**
 * Every request is timed and counted in flight, from its arrival until its response is done or
 * its connection is gone (the raw response's close fires once, either way), by route template,
 * method and status class (2xx, 4xx…). The hot path only adds numbers; the metrics are read
 * from them when scraped (observability/metrics.ts). A request abandoned by its client is told to
 * `onAbandoned` too, from the same listener (the access log and the audit trail record it).
 */
export function registerRequestMetrics(app: FastifyInstance, onAbandoned?: AbandonedRequest): void {
  app.addHook('onRequest', (request, reply, done) => {
    const start = performance.now();
    inFlight.count++;
    reply.raw.once('close', () => {
      inFlight.count--;
      const status = reply.raw.headersSent ? reply.statusCode : 499;
      // Closed before its answer was ended: the connection went first (after an answer, it closes later).
      if (!reply.raw.writableEnded) onAbandoned?.(request, reply, status);
      seriesOf(
        templateOf(request),
        request.method,
        STATUS_CLASSES[Math.floor(status / 100)] ?? `${Math.floor(status / 100)}xx`,
      ).observe((performance.now() - start) / 1000);
    });
    done();
  });
}
