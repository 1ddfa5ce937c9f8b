/**
 * Names the document's schemas: every schema with a title (`User`, `UserCreate`, `OrderPage`…,
 * given where the TypeBox schema is declared) moves to components.schemas under that title and
 * is referenced with $ref wherever it appeared, so generated clients get named types and the
 * document is a fraction of its inlined size; so do the problem answers operations share. The schemas themselves are those that validate and
 * serialise; only where they are written changes.
 */

import { STATUS_CODES } from 'node:http';
import { WHOLE_RECORD } from './fields-document.js';

type Json = Record<string, unknown>;

/** A component name: what generators turn into a type name. */
const NAME = /^[A-Z][A-Za-z0-9]*$/;

/** Members whose values are data, not schemas: a title inside them names nothing. */
const DATA_MEMBERS = new Set(['example', 'examples', 'default', 'const', 'enum']);

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null;

/**
 * Returns the document with its titled schemas named. Two different schemas with one title are a
 * mistake in the code (a client would get one type for both): it throws, and rowi does not start.
 */
export function nameComponents<T extends Json>(document: T, examples: Record<string, unknown> = {}): T {
  const components = (isObject(document.components) ? document.components : {}) as Json;
  const schemas = (isObject(components.schemas) ? components.schemas : {}) as Json;
  const seen = new Map<string, string>();

  const visit = (value: unknown, isSchema: boolean): unknown => {
    if (Array.isArray(value)) return value.map((each) => visit(each, isSchema));
    if (!isObject(value)) return value;
    const out: Json = {};
    for (const [key, member] of Object.entries(value)) {
      // The whole record a partial one stands for is named, not written where it stands (fields-document.ts).
      if (key === WHOLE_RECORD) visit(member, true);
      // The members of `properties` are names of fields, not keywords: a field named `example` is a schema.
      else if (key === 'properties' && isObject(member))
        out[key] = Object.fromEntries(Object.entries(member).map(([name, field]) => [name, visit(field, true)]));
      else out[key] = DATA_MEMBERS.has(key) || key.startsWith('x-') ? member : visit(member, true);
    }
    const title = out.title;
    if (
      !isSchema ||
      typeof title !== 'string' ||
      !NAME.test(title) ||
      !('type' in out || 'anyOf' in out || 'oneOf' in out || 'properties' in out)
    )
      return out;
    const text = JSON.stringify(out);
    const earlier = seen.get(title);
    if (earlier !== undefined && earlier !== text)
      throw new Error(`Two different schemas are titled ${title}: give one of them another title`);
    seen.set(title, text);
    schemas[title] = out;
    return { $ref: `#/components/schemas/${title}` };
  };

  const paths = visit(document.paths, false) as Record<string, Record<string, Json>>;
  const named = Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, visit(schema, false)]));
  addExamples(named, examples);
  const operations = Object.values(paths)
    .flatMap((methods) => Object.values(methods))
    .filter((operation) => isObject(operation.responses));
  const responses = nameProblemResponses(operations);
  const headers = nameHeaders(
    [
      ...operations.flatMap((operation) => Object.values(operation.responses as Json)),
      ...Object.values(responses),
    ].filter(isObject),
  );
  return {
    ...document,
    paths,
    components: {
      ...components,
      schemas: sortByName({ ...schemas, ...named }),
      responses: sortByName({ ...(components.responses as Json | undefined), ...responses }),
      headers: sortByName({ ...(components.headers as Json | undefined), ...headers }),
    },
  };
}

/**
 * Gives each named schema its example; a page (`UserPage`) without one of its own gets a page of
 * its record's example. An example for a name that is no schema is a mistake: it throws.
 */
function addExamples(schemas: Json, examples: Record<string, unknown>): void {
  for (const [name, example] of Object.entries(examples)) {
    const schema = schemas[name];
    if (!isObject(schema)) throw new Error(`An example is given for ${name}, which is not a schema of the document`);
    schema.examples = [example];
    // A whole record is one of its partial answers too (fields-document.ts): its variants show the same example.
    for (const variant of [schemas[`${name}Fields`], schemas[`Partial${name}`]])
      if (isObject(variant)) variant.examples = [example];
  }
  for (const [name, schema] of Object.entries(schemas)) {
    const record = name.endsWith('Page') ? examples[name.slice(0, -'Page'.length)] : undefined;
    if (isObject(schema) && schema.examples === undefined && record !== undefined)
      schema.examples = [{ data: [record], next_cursor: null }];
  }
}

/** The most frequent of each key's values, as JSON text. */
function mostFrequent(entries: [string, unknown][]): Map<string, string> {
  const counts = new Map<string, Map<string, number>>();
  for (const [key, value] of entries) {
    const byText = counts.get(key) ?? new Map<string, number>();
    const text = JSON.stringify(value);
    byText.set(text, (byText.get(text) ?? 0) + 1);
    counts.set(key, byText);
  }
  return new Map([...counts].map(([key, byText]) => [key, [...byText].sort((a, b) => b[1] - a[1])[0]![0]]));
}

/** Response headers (X-Request-Id, RateLimit…) described alike on most responses become components.headers. */
function nameHeaders(responses: Json[]): Json {
  const withHeaders = responses.filter((response) => isObject(response.headers));
  const shared = mostFrequent(withHeaders.flatMap((response) => Object.entries(response.headers as Json)));
  const components: Json = {};
  for (const response of withHeaders) {
    const headers = response.headers as Json;
    for (const [name, header] of Object.entries(headers)) {
      if (shared.get(name) !== JSON.stringify(header)) continue;
      components[name] = header;
      headers[name] = { $ref: `#/components/headers/${name}` };
    }
  }
  return components;
}

/**
 * The problem answers (4xx, 5xx) that most operations share, one per status, become
 * components.responses named after the status (`NotFound`, `TooManyRequests`); an operation's own
 * description of a status (the token endpoint's OAuth errors) stays where it is.
 */
function nameProblemResponses(operations: Json[]): Json {
  const shared = mostFrequent(
    operations.flatMap((operation) =>
      Object.entries(operation.responses as Json).filter(([status]) => Number(status) >= 400),
    ),
  );
  const components: Json = {};
  for (const operation of operations) {
    const responses = operation.responses as Json;
    for (const [status, response] of Object.entries(responses)) {
      if (shared.get(status) !== JSON.stringify(response)) continue;
      const name = STATUS_NAMES[Number(status)] ?? `Status${status}`;
      components[name] = response;
      responses[status] = { $ref: `#/components/responses/${name}` };
    }
  }
  return components;
}

/** Response component names: the status's reason phrase in one word. */
const STATUS_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(STATUS_CODES).map(([status, reason]) => [
    Number(status),
    (reason ?? '')
      .replace(/[^A-Za-z0-9 ]/g, '')
      .split(' ')
      .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
      .join(''),
  ]),
);

function sortByName(schemas: Json): Json {
  return Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
}
