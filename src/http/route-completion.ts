import type { onSendHookHandler, RouteOptions } from 'fastify';
import { writeNumbersInDecimal } from './number-text.js';
import { closeQuerystring } from './query-parameters.js';
import { problemResponse } from './schemas.js';

/**
 * What every route's schema gets as the route is registered, before Fastify compiles it: 507 on
 * writes, a query string that takes only the parameters it names (query-parameters.ts), the default
 * bounds of strings, integers and arrays, the decimal pattern of integers and numbers sent as text
 * (number-text.ts), and the headers of a deprecated operation. One function,
 * so the app and the bench's copy of it cannot differ.
 */
export function completeRoute(route: RouteOptions): void {
  documentWriteProblems(route);
  closeQuerystring(route);
  boundRoute(route);
  writeNumbersInDecimal(route);
  addDeprecationHeaders(route);
}

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

/**
 * Every string, integer and array rowi takes or answers is bounded, and the OpenAPI document says
 * how (a generated client, a fuzzer and a gateway can rely on it). A schema states its own bound
 * where one is meaningful (a name's 200 characters, a page's 500 records); what it leaves open is
 * bounded here, once, by kind, as each route is registered, so the bound validates requests and
 * appears in the document alike:
 * - a timestamp: 64 characters (RFC 3339 with nanoseconds and an offset is 35);
 * - any other string: 4,096 characters (an answer's path or message, a header's value);
 * - an integer: int64 and JavaScript's safe range (rowi's numbers are JavaScript numbers);
 * - an array: 1,000 items (no answer of rowi lists more: pages hold at most 500).
 * Schemas with a fixed set of values (enum, const) are bounded by them.
 */
export const TIMESTAMP_MAX_LENGTH = 64;
export const STRING_MAX_LENGTH = 4096;
export const ARRAY_MAX_ITEMS = 1000;

type Schema = Record<string, unknown>;

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Members that hold schemas (or maps or lists of them); anything else is data or a keyword. */
const SUBSCHEMAS = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames'];
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions'];

/** Adds the default bounds to a schema and every schema inside it; a bound it states stays. */
export function bound(schema: unknown, seen = new WeakSet<object>()): void {
  if (!isSchema(schema) || seen.has(schema)) return;
  seen.add(schema);
  const fixed = 'enum' in schema || 'const' in schema;
  if (schema.type === 'string' && !fixed)
    schema.maxLength ??= schema.format === 'date-time' ? TIMESTAMP_MAX_LENGTH : STRING_MAX_LENGTH;
  if (schema.type === 'integer' && !fixed) {
    schema.format ??= 'int64';
    schema.minimum ??= Number.MIN_SAFE_INTEGER;
    schema.maximum ??= Number.MAX_SAFE_INTEGER;
  }
  if (schema.type === 'array') schema.maxItems ??= ARRAY_MAX_ITEMS;
  for (const key of SUBSCHEMAS) bound(schema[key], seen);
  for (const key of SCHEMA_LISTS) if (Array.isArray(schema[key])) for (const each of schema[key]) bound(each, seen);
  for (const key of SCHEMA_MAPS)
    if (isSchema(schema[key])) for (const each of Object.values(schema[key])) bound(each, seen);
}

/** Bounds what a route takes and answers (onRoute: before Fastify compiles its validators). */
export function boundRoute(route: RouteOptions): void {
  const schema = route.schema as Record<string, unknown> | undefined;
  if (schema === undefined) return;
  for (const part of ['body', 'querystring', 'params', 'headers']) bound(schema[part]);
  const responses = isSchema(schema.response) ? Object.values(schema.response) : [];
  for (const response of responses) {
    if (!isSchema(response)) continue;
    if (isSchema(response.content))
      for (const media of Object.values(response.content)) bound(isSchema(media) ? media.schema : undefined);
    else bound(response);
    if (isSchema(response.headers)) for (const header of Object.values(response.headers)) bound(header);
  }
}

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
