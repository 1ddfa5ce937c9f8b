import type { RouteOptions } from 'fastify';
import { boundRoute } from './bounds.js';
import { addDeprecationHeaders } from './deprecation.js';
import { writeNumbersInDecimal } from './number-text.js';
import { documentWriteProblems } from './write-problems.js';

/**
 * What every route's schema gets as the route is registered, before Fastify compiles it: 507 on
 * writes, the default bounds of strings, integers and arrays, the decimal pattern of integers and
 * numbers sent as text, and the headers of a deprecated operation. One function, so the app and
 * the bench's copy of it cannot differ.
 */
export function completeRoute(route: RouteOptions): void {
  documentWriteProblems(route);
  boundRoute(route);
  writeNumbersInDecimal(route);
  addDeprecationHeaders(route);
}
