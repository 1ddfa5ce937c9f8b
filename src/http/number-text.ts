import type { ErrorObject } from 'ajv';
import type { RouteOptions } from 'fastify';

/**
 * How an integer or a number is written where it arrives as text (a path segment, a query
 * parameter, a header, an XML element): in decimal digits, with an optional minus sign and, for a
 * number, a fraction. Nothing else: JavaScript's Number() and Ajv's coercion would also read
 * `0x10` (16), `0b11`, `1e2`, ` 5`, `5.0` and `+5`, so `limit=0x10` answered 16 records and
 * `user_id=0x1` matched user 1, while a path id took one spelling only. One spelling a value means
 * one meaning in logs, caches and audit records, and one rule that clients and fuzzers can read in
 * the OpenAPI document: each such parameter carries the pattern it is checked against.
 */
export const DECIMAL_INTEGER = '^(?:0|-?[1-9][0-9]*)$';
export const DECIMAL_NUMBER = '^-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?$';

const RULES = {
  integer: {
    pattern: DECIMAL_INTEGER,
    'x-error': 'must be an integer in decimal digits (no leading zeros, sign +, fraction, exponent, hex or spaces)',
  },
  number: {
    pattern: DECIMAL_NUMBER,
    'x-error': 'must be a number in decimal digits (no sign +, exponent, hex or spaces)',
  },
} as const;

const TEXT_PARTS = ['params', 'querystring', 'headers'] as const;

type Schema = Record<string, unknown> & { properties?: Record<string, Record<string, unknown>> };

/**
 * Gives every integer and number parameter of a route its decimal pattern (onRoute, before the
 * validators are compiled and the document is made). The parameter's schema is replaced by a copy,
 * so a schema shared with bodies (an id) does not carry into them a rule about text.
 */
export function writeNumbersInDecimal(route: RouteOptions): void {
  const schema = route.schema as Record<string, Schema | undefined> | undefined;
  for (const part of TEXT_PARTS) {
    const properties = schema?.[part]?.properties;
    if (properties === undefined) continue;
    for (const [name, property] of Object.entries(properties)) {
      const type = property.type;
      if ((type === 'integer' || type === 'number') && property.pattern === undefined)
        properties[name] = { ...property, ...RULES[type] };
    }
  }
}

/**
 * The check a text part gets before Ajv coerces it: each integer or number parameter sent as text
 * must match its pattern. Undefined when the part has none.
 */
export function decimalTextCheck(
  schema: object,
): ((data: Record<string, unknown>) => ErrorObject | undefined) | undefined {
  const checked = Object.entries((schema as Schema).properties ?? {})
    .filter(
      ([, property]) =>
        (property.type === 'integer' || property.type === 'number') && typeof property.pattern === 'string',
    )
    .map(([name, property]) => ({ name, property, regex: new RegExp(property.pattern as string) }));
  if (checked.length === 0) return undefined;
  return (data) => {
    for (const { name, property, regex } of checked) {
      const value = data[name];
      if (typeof value === 'string' && !regex.test(value)) {
        return {
          instancePath: `/${name}`,
          keyword: 'pattern',
          params: { pattern: property.pattern },
          schemaPath: '',
          parentSchema: property,
          message: String(property['x-error']),
        };
      }
    }
    return undefined;
  };
}
