import fc from 'fast-check';

/**
 * fast-check arbitraries from the JSON Schemas of the OpenAPI document: values a schema accepts
 * (valid bodies, query values, path parameters), and the odd values a careless or hostile caller
 * sends instead. Covers what rowi's schemas use: objects with required and optional members,
 * arrays with bounds and uniqueness, strings with lengths, patterns and formats, integers and
 * numbers with bounds, booleans, null, unions and constants.
 */
export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  readOnly?: boolean;
  $ref?: string;
  xml?: { name?: string };
}

/** Values to prefer for members of these names (ids of records that exist), besides made-up ones. */
export type References = Record<string, unknown[]>;

/** A value the schema accepts. */
export function valid(schema: Schema, depth = 0, references: References = {}): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return fc.oneof(...branches.map((branch) => valid(branch, depth, references)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object':
      return object(schema, depth, references);
    case 'array': {
      const item = valid(schema.items ?? {}, depth + 1, references);
      const constraints = {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, Math.max(schema.minItems ?? 0, 4)),
      };
      return schema.uniqueItems
        ? fc.uniqueArray(item, { ...constraints, selector: (value) => JSON.stringify(value) })
        : fc.array(item, constraints);
    }
    case 'string':
      return string(schema);
    case 'integer':
      return fc.integer({
        min: Math.max(schema.minimum ?? -1_000_000, Number.MIN_SAFE_INTEGER),
        max: Math.min(schema.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER),
      });
    case 'number':
      return fc.double({
        min: schema.minimum ?? -1e6,
        max: schema.maximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return depth > 2 ? fc.constant(null) : odd();
  }
}

function object(schema: Schema, depth: number, references: References): fc.Arbitrary<unknown> {
  const members = Object.entries(schema.properties ?? {}).filter(([, member]) => member.readOnly !== true);
  if (members.length === 0) return fc.constant({});
  const required = new Set(schema.required ?? []);
  const member = (name: string, memberSchema: Schema) => {
    const made = valid(memberSchema, depth + 1, references);
    const known = references[name];
    return known && known.length > 0
      ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...known) }, { weight: 1, arbitrary: made })
      : made;
  };
  return fc.record(Object.fromEntries(members.map(([name, memberSchema]) => [name, member(name, memberSchema)])), {
    requiredKeys: members.map(([name]) => name).filter((name) => required.has(name)),
  });
}

const regexes = new Map<string, RegExp>();

function string(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.min(schema.maxLength ?? 40, 80);
  let base: fc.Arbitrary<string>;
  if (schema.format === 'date-time') {
    base = fc
      .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date(), noInvalidDate: true })
      .map((date) => date.toISOString());
  } else if (schema.format === 'email') {
    base = fc.emailAddress();
  } else if (schema.format === 'uri-reference') {
    base = fc.constantFrom('/v1/users', '/problems/not-found', 'https://example.com/x');
  } else if (schema.pattern) {
    let regex = regexes.get(schema.pattern);
    if (!regex) regexes.set(schema.pattern, (regex = new RegExp(schema.pattern, 'u')));
    const tested = regex;
    // stringMatching does not know every construct (lookaheads): then strings are drawn and tried.
    try {
      base = fc.stringMatching(tested);
    } catch {
      base = fc
        .string({ minLength: Math.max(minLength, 1), maxLength, unit: 'grapheme-ascii' })
        .filter((text) => tested.test(text));
    }
    base = base.filter((text) => tested.test(text));
  } else {
    base = fc.string({ minLength, maxLength, unit: fc.constantFrom('a', 'b', 'Z', '0', ' ', '-', 'é', '😀') });
  }
  return base.filter((text) => [...text].length >= minLength && text.length <= (schema.maxLength ?? Infinity));
}

/** Values of every kind a field should not hold, or holds only at its edges. */
export const ODD_VALUES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1,
  1.5,
  -0,
  2 ** 53,
  2 ** 63,
  1e308,
  -1e308,
  5e-324,
  '',
  ' ',
  '\t',
  '0',
  '-1',
  '1e400',
  'NaN',
  'null',
  'true',
  '[]',
  '{}',
  'x'.repeat(5000),
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udc00x',
  '😀',
  '\u202e',
  '\ufeff',
  '<b>&amp;</b>',
  "' OR 1=1 --",
  '../../etc/passwd',
  '0000-01-01T00:00:00+01:00',
  '2016-12-31T23:59:60Z',
  '9999-12-31T23:59:59.999Z',
  '+275760-09-13T00:00:00Z',
  '2026-02-30T00:00:00Z',
  // An own member named __proto__, as JSON.parse makes it (a literal would set the prototype instead).
  {},
  [],
  [[[[[]]]]],
  JSON.parse('{"__proto__":{"admin":true}}'),
  [null],
  ['x'],
  { name: 'x' },
];

export function odd(): fc.Arbitrary<unknown> {
  return fc.constantFrom(...ODD_VALUES);
}

/** Strings for a query parameter or a path segment that should not hold them. */
export const ODD_TEXT = [
  '',
  ' ',
  '-1',
  '0',
  '007',
  '1e3',
  '0x10',
  '1e400',
  '9007199254740993',
  'NaN',
  'abc',
  '%',
  '%zz',
  '%00',
  '%ff',
  '%ED%A0%80',
  '..',
  '%2e%2e',
  'x'.repeat(3000),
  '😀',
  '%F0%9F%98%80',
  'a,b,,',
  '-',
  '--id',
  'id,id',
  'name,-name',
  '0000-01-01T00:00:00Z',
  '2016-12-31T23:59:60Z',
  'true',
  '[]',
];
