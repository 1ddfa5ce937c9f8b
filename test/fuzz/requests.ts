import fc from 'fast-check';
import { compileXmlSerializer, type XmlSchema } from '../../src/http/xml.js';
import { odd, ODD_TEXT, valid, type References, type Schema } from './arbitraries.js';

/**
 * Requests for one operation of the OpenAPI document: its path with real and made-up parameters,
 * a query string of documented, odd and unknown parameters, headers a client may send, the
 * credentials of an admin, a reader, a caller that sees only its own records, a stranger or
 * nobody, and a body: valid, then mutated, in JSON and in XML, or raw text no parser should choke on.
 */
export interface Operation {
  method: string;
  path: string;
  parameters: {
    in: 'path' | 'query' | 'header';
    name: string;
    schema: Schema;
    required?: boolean;
    examples?: Record<string, { value: unknown }>;
  }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}

export interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

export interface Credentials {
  admin: string;
  reader: string;
  /** A caller that sees only its own users, items and orders, when the run has one. */
  own?: string;
}

/** Real values for a path parameter (records the run created), for the operation's path. */
export type Fixtures = (path: string, parameter: string) => (string | number)[];

/** Real values for members of a body (user_id, item_id) that refer to records. */
export type { References } from './arbitraries.js';

// Mostly what clients send, so that most requests reach the services; then the odd ones.
const ACCEPT = [
  ...Array<undefined>(12).fill(undefined),
  'application/json',
  'application/json',
  'application/xml',
  'application/xml',
  'text/xml',
  '*/*',
  'application/*',
  'text/html',
  'image/png',
  'application/json;q=0',
  'application/xml;q=0.5, application/json;q=0.1',
  'application/problem+json',
  ',,,',
  'application/json;q=2',
  '*/*;q=0',
  // The exports of a list and the refused rows of an import; anywhere else 406.
  'text/csv',
  'application/x-ndjson',
];
const ETAGS = [
  ...Array<undefined>(10).fill(undefined),
  '*',
  '"v1"',
  '"v2"',
  'W/"v1"',
  '"v1-xml"',
  'garbage',
  '"v999999"',
  '""',
  '"v1", "v2"',
];
const IDEMPOTENCY_KEYS = [
  ...Array<undefined>(8).fill(undefined),
  'fuzz-key-1',
  'fuzz-key-2',
  'fuzz-key-3',
  '',
  'x'.repeat(300),
  'ключ',
  'a b',
];
const REQUEST_IDS = [...Array<undefined>(6).fill(undefined), 'fuzz-1', '', 'x'.repeat(200), 'a\tb', '../etc'];
const CONTENT_TYPE_VARIANTS = [
  'text/plain',
  'application/json; charset=latin1',
  'application/xml; charset=utf-16',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=UTF-8',
  'application/json;;',
];

/** Raw JSON texts that are malformed, or well-formed with a trap in them. */
const RAW_JSON = [
  '',
  '{',
  '{"name":',
  '[]',
  'null',
  '"text"',
  '42',
  '{"name":"a","name":"b"}',
  '{"__proto__":{"x":1}}',
  '{"constructor":{"prototype":{"x":1}}}',
  `{"a":${'['.repeat(40)}${']'.repeat(40)}}`,
  '{"name":"\\u0000"}',
  '{"name":"\\ud800"}',
  '{"a":1}garbage',
  '\ufeff{}',
  '{"a":1e999}',
  '{"quantity":-0}',
];
/** Raw XML texts of shapes no document has. */
const RAW_XML = [
  '',
  '<',
  '<a>',
  '<a></b>',
  '<a/><a/>',
  '<!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>',
  '<a><__proto__/></a>',
  '<a>&#0;</a>',
  '<a>&#xD800;</a>',
  '<a>&nbsp;</a>',
  `<a>${'<b>'.repeat(40)}${'</b>'.repeat(40)}</a>`,
  `<a ${Array.from({ length: 20 }, (_, index) => `x${index}="1"`).join(' ')}/>`,
  '<a><![CDATA[</a>]]></a>',
  '<?xml version="1.0"?>',
  '<a xmlns:x="u"><x:b nil="true"/></a>',
];

export function requestFor(
  operation: Operation,
  credentials: Credentials,
  fixtures: Fixtures,
  references: References = {},
): fc.Arbitrary<FuzzRequest> {
  const queryParameters = operation.parameters.filter((parameter) => parameter.in === 'query');
  const path = pathFor(operation, fixtures);
  const query = fc
    .array(
      fc.oneof(
        ...queryParameters.map((parameter) => fc.tuple(fc.constant(parameter.name), queryValue(parameter))),
        fc.tuple(fc.constantFrom('unknown', 'api_key', 'access_token', 'x%00'), fc.constantFrom(...ODD_TEXT)),
      ),
      { maxLength: 4 },
    )
    .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([name, value]) => `${name}=${value}`).join('&')}`));
  return fc
    .record({
      path,
      query: fc.oneof({ weight: 1, arbitrary: query }, { weight: 2, arbitrary: fc.constant('') }),
      accept: fc.constantFrom(...ACCEPT),
      ifMatch: fc.constantFrom(...ETAGS),
      ifNoneMatch: fc.constantFrom(...ETAGS),
      idempotencyKey: fc.constantFrom(...IDEMPOTENCY_KEYS),
      requestId: fc.constantFrom(...REQUEST_IDS),
      credentials: fc.oneof(
        { weight: 12, arbitrary: fc.constant<[string, string] | undefined>(['x-api-key', credentials.admin]) },
        ...(credentials.own === undefined
          ? []
          : [{ weight: 6, arbitrary: fc.constant<[string, string] | undefined>(['x-api-key', credentials.own]) }]),
        {
          weight: 4,
          arbitrary: fc.constantFrom<[string, string] | undefined>(
            ['x-api-key', credentials.reader],
            ['x-api-key', 'rowi_aaaaaaaa_not-a-key'],
            ['authorization', 'Bearer not.a.token'],
            ['authorization', 'Basic YWRtaW46eA=='],
            undefined,
          ),
        },
      ),
      body: operation.requestBody ? body(operation.requestBody.content, references) : fc.constant(undefined),
    })
    .map(
      ({
        path: url,
        query: search,
        accept,
        ifMatch,
        ifNoneMatch,
        idempotencyKey,
        requestId,
        credentials: credential,
        body: sent,
      }) => {
        const headers: Record<string, string> = {};
        if (accept !== undefined) headers.accept = accept;
        if (ifMatch !== undefined) headers['if-match'] = ifMatch;
        if (ifNoneMatch !== undefined) headers['if-none-match'] = ifNoneMatch;
        if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
        if (requestId !== undefined) headers['x-request-id'] = requestId;
        if (credential !== undefined) headers[credential[0]] = credential[1];
        if (sent !== undefined) headers['content-type'] = sent.contentType;
        return {
          method: operation.method,
          url: `${url}${search}`,
          headers,
          ...(sent !== undefined ? { body: sent.text } : {}),
        };
      },
    );
}

/** The operation's path with its parameters given values: records the run made, made-up ones, odd text. */
export function pathFor(operation: Pick<Operation, 'path' | 'parameters'>, fixtures: Fixtures): fc.Arbitrary<string> {
  const pathParameters = operation.parameters.filter((parameter) => parameter.in === 'path');
  return fc
    .tuple(
      ...pathParameters.map((parameter) =>
        pathValue(
          parameter.schema,
          fixtures(operation.path, parameter.name),
          operation.path.endsWith(`{${parameter.name}}`),
        ),
      ),
    )
    .map((values) =>
      pathParameters.reduce(
        (url, parameter, index) => url.replace(`{${parameter.name}}`, values[index]!),
        operation.path,
      ),
    );
}

function pathValue(schema: Schema, known: (string | number)[], last: boolean): fc.Arbitrary<string> {
  const made =
    schema.type === 'integer'
      ? fc.integer({ min: 1000, max: Number.MAX_SAFE_INTEGER }).map(String)
      : valid(schema).map((value) => encodeURIComponent(String(value)));
  const values = fc.oneof(
    ...(known.length > 0 ? [{ weight: 6, arbitrary: fc.constantFrom(...known.map(String)) }] : []),
    { weight: 2, arbitrary: made },
    // Not dot segments: in-process injection resolves them as a browser would (/problems/.. is /);
    // raw ones are tested over real sockets (test/resources/weather.bad-input.test.ts).
    {
      weight: 1,
      arbitrary: fc.constantFrom(...ODD_TEXT.filter((text) => text.length < 100 && !/^(\.|%2e)+$/i.test(text))),
    },
  );
  // Not empty at the end of the path: `/v1/users/` is the collection's URL with a trailing slash,
  // redirected there (docs/conventions.md), not this operation.
  return last ? values.filter((value) => value !== '') : values;
}

function queryValue({ schema, examples: documented = {} }: Operation['parameters'][number]): fc.Arbitrary<string> {
  // Documented examples too: a made-up value of a parameter that names things (fields) names none.
  const examples = Object.values(documented).map((example) => encodeURIComponent(String(example.value)));
  return fc.oneof(
    { weight: 3, arbitrary: valid(schema).map((value) => encodeURIComponent(String(value))) },
    { weight: 2, arbitrary: fc.constantFrom(...ODD_TEXT) },
    ...(examples.length > 0 ? [{ weight: 3, arbitrary: fc.constantFrom(...examples) }] : []),
  );
}

interface Body {
  contentType: string;
  text: string;
}

function body(content: Record<string, { schema: Schema }>, references: References): fc.Arbitrary<Body | undefined> {
  const types = Object.keys(content);
  const jsonType = types.find((type) => type.endsWith('json'));
  const schema = content[types[0]!]!.schema;
  const toXml = compileXmlSerializer(schema as XmlSchema, 'document');
  const value = valid(schema, 0, references);
  const mutated = fc.oneof(
    { weight: 6, arbitrary: value },
    // One member replaced by an odd value, or one member added (unknown, reserved, read-only).
    fc
      .tuple(value, fc.constantFrom(...Object.keys(schema.properties ?? { name: {} })), odd())
      .map(([base, key, replacement]) => ({ ...(base as object), [key]: replacement })),
    fc
      .tuple(value, fc.constantFrom('unknown', 'id', 'created_at', 'version', 'scopes', 'total', 'stale'), odd())
      .map(([base, key, extra]) => ({ ...(base as object), [key]: extra })),
    odd(),
  );
  const forms: fc.WeightedArbitrary<Body | undefined>[] = [
    {
      weight: 8,
      arbitrary: mutated.map((sent) => ({
        contentType: jsonType ?? types[0]!,
        text: types[0]!.includes('form') ? asForm(sent) : (JSON.stringify(sent) ?? ''),
      })),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...RAW_JSON).map((text) => ({ contentType: jsonType ?? 'application/json', text })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...CONTENT_TYPE_VARIANTS), mutated)
        .map(([contentType, sent]) => ({ contentType, text: JSON.stringify(sent) ?? '' })),
    },
  ];
  if (types.includes('application/xml')) {
    forms.push(
      { weight: 4, arbitrary: mutated.map((sent) => ({ contentType: 'application/xml', text: toXml(sent) })) },
      { weight: 1, arbitrary: fc.constantFrom(...RAW_XML).map((text) => ({ contentType: 'application/xml', text })) },
    );
  }
  return fc.oneof(...forms);
}

/** A value as a form body: an object's members as fields, anything else as one field's text. */
function asForm(value: unknown): string {
  const fields =
    typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.entries(value) : [['value', value]];
  return new URLSearchParams(
    fields.map(([name, field]): [string, string] => [
      String(name),
      typeof field === 'string' ? field : (JSON.stringify(field) ?? ''),
    ]),
  ).toString();
}
