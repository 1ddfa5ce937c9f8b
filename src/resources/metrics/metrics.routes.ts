import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { operation, RESPONSE_HEADERS } from '../../http/schemas.js';

/** The Prometheus text exposition format, version 0.0.4: what every Prometheus scrapes. */
export const EXPOSITION_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface MetricsRoutesOptions {
  /** The exposition: this process's metrics, or with --workers every worker's added up. */
  collect: () => Promise<string>;
}

/**
 * GET /metrics: rowi's Prometheus metrics (docs/operations.md "Metrics"), for a scraper holding the
 * `metrics:read` scope (an admin, or a caller granted it; Prometheus can use an API key as a
 * header or the OAuth client-credentials flow). Outside /v1, like the health probes: it
 * describes the service, not a resource.
 */
const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRoutesOptions> = async (app, { collect }) => {
  app.get(
    '/metrics',
    {
      schema: operation({
        operationId: 'getMetrics',
        permission: 'metrics:read',
        summary: 'Prometheus metrics',
        description:
          "Request durations by route template, method and status class; requests in flight; database transaction and pool-wait durations; rate-limit refusals by policy; authentication failures by kind; weather provider calls, cache lookups and breaker state; event-loop delay and process metrics. With --workers, every worker's metrics added up. The answer is the Prometheus text format (0.0.4) whatever Accept asks for.",
        tags: ['service'],
        fixedMediaType: EXPOSITION_TYPE,
        response: {
          200: {
            description: 'The metrics, in the Prometheus text exposition format',
            headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
            content: {
              'text/plain': {
                schema: Type.String({ description: 'Prometheus text exposition format 0.0.4', maxLength: 10_000_000 }),
              },
            },
          },
        },
      }),
    },
    async (_request, reply) =>
      reply
        .type(EXPOSITION_TYPE)
        .header('cache-control', 'no-store')
        .send(await collect()),
  );
};

export default metricsRoutes;
