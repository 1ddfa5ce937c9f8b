import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nameComponents } from '../../src/http/openapi-components.js';
import { startApp, type TestApp } from '../helpers/app.js';
import { dereferenced } from '../helpers/openapi.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let test: TestApp;
let document: Json;
beforeAll(async () => {
  test = await startApp();
  document = dereferenced((await test.call({ url: '/v1/openapi.json' })).json as Json);
});
afterAll(() => test.close());

/** A schema as Ajv reads it: the document's own keywords (x-…, xml) left out. */
const plain = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(plain);
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key]) => !key.startsWith('x-') && key !== 'xml' && key !== '$id' && key !== 'examples')
      .map(([key, value]) => [key, plain(value)]),
  );
};

describe('GET /v1/openapi.json: examples', () => {
  it('every named schema has an example, and each example is valid against its schema', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    const invalid: string[] = [];
    for (const [name, schema] of Object.entries<Json>(document.components.schemas)) {
      if (name === 'OpenAPI') continue; // the document itself
      expect(schema.examples, `${name} has an example`).toHaveLength(1);
      const validate = ajv.compile(plain(schema) as object);
      if (!validate(schema.examples[0])) invalid.push(`${name}: ${ajv.errorsText(validate.errors)}`);
    }
    expect(invalid).toEqual([]);
  });

  it('every operation shows an example of what it takes and of what it answers with success', () => {
    const missing: string[] = [];
    for (const [path, methods] of Object.entries<Json>(document.paths)) {
      for (const [method, operation] of Object.entries<Json>(methods)) {
        if (method === 'head' || path === '/v1/openapi.json') continue;
        const bodies = Object.entries<Json>(operation.requestBody?.content ?? {}).map(
          ([media, content]) => [`request ${media}`, content] as const,
        );
        const answers = Object.entries<Json>(operation.responses)
          .filter(([status]) => status.startsWith('2'))
          .flatMap(([status, response]) =>
            Object.entries<Json>(response.content ?? {}).map(
              ([media, content]) => [`${status} ${media}`, content] as const,
            ),
          );
        for (const [what, content] of [...bodies, ...answers]) {
          if (!/json/.test(what)) continue;
          if (content.example === undefined && content.examples === undefined && content.schema?.examples === undefined)
            missing.push(`${method.toUpperCase()} ${path} ${what}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('an example for a name that is no schema stops rowi at start', () => {
    expect(() => nameComponents({ paths: {} }, { Nothing: {} })).toThrow(/example is given for Nothing/);
  });
});
