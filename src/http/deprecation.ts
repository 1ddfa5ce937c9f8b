import type { onSendHookHandler, RouteOptions } from 'fastify';

/** The marks an operation carries when it is deprecated (docs/compatibility.md). */
interface DeprecationMarks {
  deprecated?: boolean;
  /** When it was deprecated: an RFC 3339 timestamp. */
  'x-deprecated-at'?: string;
  /** When it may stop working: an RFC 3339 timestamp. */
  'x-sunset'?: string;
}

/**
 * An operation marked `deprecated` in the OpenAPI document tells every caller so on every answer:
 * `Deprecation` (RFC 9745: `@` and the Unix time it was deprecated) and, once a date is set,
 * `Sunset` (RFC 8594: the HTTP date after which it may stop working). The document drives the
 * headers, so the two cannot disagree. A deprecated operation without a date is refused at start.
 * Run for every route as it is registered (app.ts).
 */
export function addDeprecationHeaders(route: RouteOptions): void {
  const marks = route.schema as DeprecationMarks | undefined;
  if (marks?.deprecated !== true) return;
  const since = Date.parse(marks['x-deprecated-at'] ?? '');
  if (Number.isNaN(since))
    throw new Error(
      `${String(route.method)} ${route.url} is deprecated without x-deprecated-at (an RFC 3339 timestamp)`,
    );
  const sunset = marks['x-sunset'] === undefined ? undefined : Date.parse(marks['x-sunset']);
  if (sunset !== undefined && Number.isNaN(sunset))
    throw new Error(`${String(route.method)} ${route.url} has an x-sunset that is not an RFC 3339 timestamp`);
  const deprecation = `@${Math.floor(since / 1000)}`;
  const sunsetHeader = sunset === undefined ? undefined : new Date(sunset).toUTCString();
  const hook: onSendHookHandler = (_request, reply, payload, done) => {
    reply.header('deprecation', deprecation);
    if (sunsetHeader !== undefined) reply.header('sunset', sunsetHeader);
    done(null, payload);
  };
  route.onSend = [hook, ...[route.onSend ?? []].flat()];
}
