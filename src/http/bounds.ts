import type { RouteOptions } from 'fastify';

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
