import type { RouteOptions } from 'fastify';
import { problemResponse } from './schemas.js';

/** Methods that write: any of them can find the database without space for the write (507). */
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Adds the 507 problem to the documented responses of a route that writes (run for every route
 * as it is registered): which operations write is known from their method, not from what each
 * declares.
 */
export function documentWriteProblems(route: RouteOptions): void {
  const methods = [route.method].flat();
  const response = (route.schema as { response?: Record<string, unknown> } | undefined)?.response;
  if (response === undefined || !methods.some((method) => WRITE_METHODS.has(method))) return;
  response[507] ??= problemResponse(507);
}
