import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { createItem, createUser, setStock } from '../helpers/records.js';

/**
 * Integers and numbers sent as text (path segments, query parameters, headers) are read in decimal
 * digits only, as the OpenAPI document says with a pattern on each: not as JavaScript's Number()
 * reads them (hex, binary, octal, exponents, spaces, a fraction of zero, a plus sign).
 */
let test: TestApp;
let parameters: {
  method: string;
  path: string;
  in: string;
  name: string;
  schema: { type: string; pattern?: string };
}[];

beforeAll(async () => {
  test = await startApp();
  const user = (await createUser(test)).user;
  const { item } = await createItem(test);
  await setStock(test, item.id, 100);
  for (let index = 0; index < 20; index++) await createUser(test);
  await test.call({
    method: 'POST',
    url: '/v1/orders',
    body: { name: 'decimal', user_id: user.id, lines: [{ item_id: item.id, quantity: 1 }] },
  });
  const document = test.app.swagger() as {
    paths: Record<
      string,
      Record<string, { parameters?: { in: string; name: string; schema: { type: string; pattern?: string } }[] }>
    >;
  };
  parameters = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).flatMap(([method, operation]) =>
      (operation.parameters ?? []).map((parameter) => ({ method: method.toUpperCase(), path, ...parameter })),
    ),
  );
});
afterAll(() => test.close());

/** Spellings Number() reads as a number, each refused; with what Number() makes of it. */
const SPELLINGS: [string, string][] = [
  ['0x10', 'hex (16)'],
  ['0b11', 'binary (3)'],
  ['0o7', 'octal (7)'],
  ['1e1', 'an exponent (10)'],
  [' 5', 'a leading space'],
  ['5 ', 'a trailing space'],
  ['+5', 'a plus sign'],
  ['5.0', 'a fraction of zero'],
  ['05', 'a leading zero'],
  ['\u0665', 'an Arabic-Indic digit'],
  ['\uff15', 'a full-width digit'],
];

const integerParameters = () =>
  parameters.filter((parameter) => parameter.schema.type === 'integer' || parameter.schema.type === 'number');

/** A URL for the operation with a valid value in every path parameter but the one tried. */
function urlWith(parameter: { path: string; in: string; name: string }, value: string): string {
  const path = parameter.path.replace(/\{(\w+)\}/g, (_whole, name: string) =>
    parameter.in === 'path' && name === parameter.name
      ? encodeURIComponent(value)
      : name === 'place'
        ? 'decimal-place'
        : '1',
  );
  return parameter.in === 'query' ? `${path}?${parameter.name}=${encodeURIComponent(value)}` : path;
}

describe('integers sent as text', () => {
  it('every integer and number parameter carries the decimal pattern in the OpenAPI document', () => {
    expect(integerParameters().length).toBeGreaterThan(40);
    expect(
      integerParameters()
        .filter((parameter) => parameter.schema.pattern === undefined)
        .map((parameter) => `${parameter.method} ${parameter.path} ${parameter.in} ${parameter.name}`),
    ).toEqual([]);
  });

  it.each(SPELLINGS)(
    'GET of every collection: 400 invalid-query naming the parameter when an integer query parameter is %s (%s)',
    async (spelling) => {
      const queried = integerParameters().filter((parameter) => parameter.in === 'query' && parameter.method === 'GET');
      expect(queried.length).toBeGreaterThan(10);
      for (const parameter of queried) {
        const url = urlWith(parameter, spelling);
        const problem = expectProblem(await test.call({ url }), 400, 'invalid-query');
        expect(problem.errors, url).toEqual([
          { in: 'query', pointer: `#/${parameter.name}`, detail: expect.stringMatching(/decimal digits/) },
        ]);
      }
    },
  );

  it.each(SPELLINGS)('every operation on a record: 404 when an id in the path is %s (%s)', async (spelling) => {
    // HEAD answers GET's status without a body.
    const addressed = integerParameters().filter((parameter) => parameter.in === 'path' && parameter.method !== 'HEAD');
    expect(addressed.length).toBeGreaterThan(30);
    for (const parameter of addressed) {
      const url = urlWith(parameter, spelling);
      expectProblem(
        await test.call({
          method: parameter.method as 'GET',
          url,
          ...(['POST', 'PUT', 'PATCH'].includes(parameter.method) ? { body: {} } : {}),
        }),
        404,
        'not-found',
      );
    }
  });

  it('GET /v1/users: 400 when limit=0x10, where it answered 16 users', async () => {
    expect(
      expectProblem(await test.call({ url: '/v1/users?limit=0x10' }), 400, 'invalid-query').errors![0]!.pointer,
    ).toBe('#/limit');
    expect((await test.call({ url: '/v1/users?limit=16' })).json.data).toHaveLength(16);
  });

  it('GET /v1/orders: 400 when user_id=0x1, where it matched user 1', async () => {
    expect(
      expectProblem(await test.call({ url: '/v1/orders?user_id=0x1' }), 400, 'invalid-query').errors![0]!.pointer,
    ).toBe('#/user_id');
    expect((await test.call({ url: '/v1/orders?user_id=1' })).json.data).toHaveLength(1);
  });

  it.each([
    ['-1', /at least 1/],
    ['0', /at least 1/],
    ['501', /at most 500/],
    ['abc', /decimal digits/],
  ])('GET /v1/users: 400 naming the rule when limit=%s', async (limit, rule) => {
    expect(
      expectProblem(await test.call({ url: `/v1/users?limit=${limit}` }), 400, 'invalid-query').errors![0]!.detail,
    ).toMatch(rule);
  });
});
