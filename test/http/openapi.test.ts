import { dereferenced } from '../helpers/openapi.js';
import { CONSOLE_PATH } from '../../src/http/console-page.js';
import { DOCS_PATH } from '../../src/http/docs-page.js';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileAllValidators } from '../../src/http/validation.js';
import { compileAllSerializers } from '../../src/http/serializers.js';
import { startApp, type TestApp } from '../helpers/app.js';

interface Operation {
  operationId?: string;
  parameters?: { name: string; in: string; required?: boolean }[];
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { content?: Record<string, { schema: unknown }>; headers?: Record<string, unknown> }>;
}
type Document = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};

let test: TestApp;
let document: Document;
beforeAll(async () => {
  test = await startApp();
  const reply = await test.call({ url: '/v1/openapi.json' });
  expect(reply.status).toBe(200);
  expect(reply.mediaType).toBe('application/json');
  document = dereferenced(reply.json as Document);
});
afterAll(() => test.close());

function operations(): [string, string, Operation][] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]): [string, string, Operation] => [path, method, operation]),
  );
}

describe('request and response schemas', () => {
  // Compiling every schema takes 5-30 s on a busy 2-core machine (fast-json-stringify most of it).
  it(
    "every route's request validators compile (the app compiles them on first use, so a broken schema must fail here)",
    { timeout: 120_000 },
    () => {
      expect(compileAllValidators()).toBeGreaterThan(50);
      expect(compileAllValidators()).toBe(0);
    },
  );

  it(
    "every route's response serializers compile (the app compiles them on first use, so a broken schema must fail here)",
    { timeout: 120_000 },
    () => {
      expect(compileAllSerializers()).toBeGreaterThan(50);
      expect(compileAllSerializers()).toBe(0);
    },
  );
});

describe('GET /v1/openapi.json', () => {
  it('GET /v1/openapi.json: a valid OpenAPI 3.1 document according to a standard validator, with resolvable $refs', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
    expect(() => validator.resolveRefs()).not.toThrow();
  });

  it('GET /v1/openapi.json: every registered route (method and path) is in the document, but the docs page and the console (HTML, not the API)', () => {
    const missing = test.app.routeTable
      .list()
      .filter(({ url }) => ![DOCS_PATH, CONSOLE_PATH].some((page) => url === page || url.startsWith(`${page}/`)))
      .map(({ method, url }) => [method.toLowerCase(), url.replace(/:([A-Za-z_]+)/g, '{$1}')] as const)
      .filter(([method, path]) => document.paths[path]?.[method] === undefined);
    expect(missing).toEqual([]);
    expect(test.app.routeTable.list().length).toBeGreaterThanOrEqual(14);
  });

  it("GET /v1/openapi.json: every operation's tag is one of the document's tags, each described", () => {
    const defined = new Map(
      (document as unknown as { tags: { name: string; description?: string }[] }).tags.map((tag) => [
        tag.name,
        tag.description,
      ]),
    );
    for (const [path, method, operation] of operations()) {
      for (const tag of (operation as { tags?: string[] }).tags ?? [])
        expect(defined.has(tag), `${method.toUpperCase()} ${path}: tag ${tag} is not in the document's tags`).toBe(
          true,
        );
    }
    for (const [name, description] of defined) expect(description, name).toBeTruthy();
  });

  it('GET /v1/openapi.json: operation ids are unique', () => {
    const ids = operations().map(([, , operation]) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('GET /v1/openapi.json: every operation documents 406 (unless a standard fixes its format as JSON, or it is an event stream) and 500 as RFC 9457 problems in JSON and XML', () => {
    for (const [path, method, operation] of operations()) {
      const marks = operation as { 'x-json-fixed-by'?: string; 'x-event-stream'?: true; 'x-fixed-media-type'?: string };
      const fixed =
        marks['x-json-fixed-by'] !== undefined ||
        marks['x-event-stream'] === true ||
        marks['x-fixed-media-type'] !== undefined;
      for (const status of fixed ? ['500'] : ['406', '500']) {
        const content = operation.responses[status]?.content;
        expect(Object.keys(content ?? {}), `${method} ${path} ${status}`).toEqual([
          'application/problem+json',
          'application/problem+xml',
        ]);
        expect(content!['application/problem+json']!.schema).toEqual(document.components.schemas.Problem);
      }
    }
    expect(document.components.schemas.Problem).toMatchObject({
      xml: { name: 'problem', namespace: 'urn:ietf:rfc:7807' },
    });
  });

  it('GET /v1/openapi.json: operations with a body document 400, 413, 415 and 422 and take JSON and XML (JSON only where they answer JSON only; a file where they import one)', () => {
    // The one documented exception: the OAuth token endpoint takes a form body (RFC 6749 §4.4.2), not JSON or XML,
    // and answers any other body, and any invalid form, with an RFC 6749 invalid_request (400): no 415, no 422.
    const formOnly = (path: string, method: string) => path === '/oauth/token' && method === 'post';
    const withBody = operations().filter(([, , operation]) => operation.requestBody);
    expect(withBody.filter(([path, method]) => formOnly(path, method))).toHaveLength(1);
    for (const [path, method, operation] of withBody) {
      const statuses = formOnly(path, method) ? ['400', '413'] : ['400', '413', '415', '422'];
      for (const status of statuses) expect(operation.responses[status], `${method} ${path} ${status}`).toBeDefined();
      if (formOnly(path, method)) continue;
      const answers = Object.keys(
        Object.entries(operation.responses).find(([status]) => status.startsWith('2'))![1].content ?? {},
      );
      const taken = Object.keys(operation.requestBody!.content);
      // An import takes a file (CSV or NDJSON), whatever it answers in.
      if (taken.every((media) => media === 'text/csv' || media === 'application/x-ndjson')) continue;
      if (answers.includes('application/xml'))
        expect(taken, `${method} ${path}`).toEqual(expect.arrayContaining(['application/json', 'application/xml']));
      else expect(taken, `${method} ${path}`).not.toContain('application/xml');
    }
    const patch = document.paths['/v1/users/{id}']!.patch!;
    expect(Object.keys(patch.requestBody!.content)).toEqual([
      'application/merge-patch+json',
      'application/json',
      'application/xml',
    ]);
    expect(Object.keys(document.paths['/oauth/token']!.post!.requestBody!.content)).toEqual([
      'application/x-www-form-urlencoded',
    ]);
  });

  it('GET /v1/openapi.json: operations on /v1/users/{id} declare the id and document 404', () => {
    for (const method of ['get', 'put', 'patch', 'delete']) {
      const operation = document.paths['/v1/users/{id}']![method]!;
      expect(operation.parameters).toEqual(
        expect.arrayContaining([expect.objectContaining({ name: 'id', in: 'path', required: true })]),
      );
      expect(operation.responses['404']).toBeDefined();
    }
  });

  it('GET /v1/openapi.json: success responses offer the XML alternative, with the XML element names', () => {
    const read = document.paths['/v1/users/{id}']!.get!.responses['200']!;
    expect(Object.keys(read.content!)).toEqual(['application/json', 'application/xml']);
    expect(read.content!['application/xml']!.schema).toMatchObject({ xml: { name: 'user' } });
    expect(read.headers).toHaveProperty('ETag');
    const list = document.paths['/v1/users']!.get!;
    expect(list.responses['200']!.content!['application/xml']!.schema).toMatchObject({
      xml: { name: 'users' },
      properties: { data: { xml: { wrapped: true } } },
    });
    expect(list.responses['200']!.headers).toHaveProperty('Link');
    expect(list.parameters!.map((parameter) => parameter.name)).toEqual(
      expect.arrayContaining(['limit', 'cursor', 'sort', 'email', 'name', 'created_after', 'created_before']),
    );
  });

  it('GET /v1/openapi.json: POST /v1/users documents Idempotency-Key, 201 with Location, 409 and 422', () => {
    const create = document.paths['/v1/users']!.post!;
    expect(create.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'idempotency-key', in: 'header' })]),
    );
    expect(create.responses['201']!.headers).toHaveProperty('Location');
    expect(create.responses['409']).toBeDefined();
    expect(create.responses['422']).toBeDefined();
  });

  it('GET /v1/openapi.json: 200 JSON when only XML is acceptable (the document exists as JSON only, and says so)', async () => {
    const reply = await test.call({ url: '/v1/openapi.json', headers: { accept: 'application/xml' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('application/json');
  });
});
