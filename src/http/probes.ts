import type { FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** true on the health probes (resources/health/health.routes.ts). */
    probe?: boolean;
  }
}

/**
 * Health probes are not callers' requests, and must answer whatever the API is going through, so
 * that an orchestrator sees the process and not its load: they are not in the audit trail, not
 * counted against rate limits, have no handler budget and are never shed. One route flag, read by
 * each of those mechanisms.
 */
export function isProbe(request: FastifyRequest): boolean {
  return request.routeOptions.config.probe === true;
}
