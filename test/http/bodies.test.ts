import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problems.js';
import { buildUser, createItem, createUser, setStock } from '../helpers/records.js';
import { storedInventory, storedUsers } from '../helpers/stored.js';
import { buildObservation, weatherHelpers } from '../helpers/weather.js';

/**
 * Request text rowi refuses, on every database (docs/conventions.md): XML past its limits or of
 * any hostile shape, NUL in a body or a query string, bytes that are not UTF-8, lone surrogates,
 * and bodies holding more values than any document of rowi's. Each gets a clear 400 problem (never
 * a 5xx), and nothing stored changes.
 */
let test: TestApp;
let userId: number;
let itemId: number;
beforeAll(async () => {
  test = await startApp();
  userId = (await createUser(test)).user.id;
  itemId = (await createItem(test)).item.id;
  await setStock(test, itemId, 100);
  await weatherHelpers(() => test).recordObservation('bodies');
});
afterAll(() => test.close());

const XML = { 'content-type': 'application/xml' };
const JSON_TYPE = { 'content-type': 'application/json' };

/** Everything stored that a write could touch. */
async function stored() {
  const db = test.storage.db;
  return {
    users: await storedUsers(test),
    inventory: await storedInventory(test),
    callers: await db.selectFrom('callers').selectAll().orderBy('id').execute(),
    places: await db.selectFrom('places').selectAll().orderBy('id').execute(),
    observations: await db.selectFrom('observations').selectAll().orderBy('id').execute(),
  };
}

async function unchanged<T>(act: () => Promise<T>): Promise<T> {
  const before = await stored();
  const result = await act();
  expect(await stored()).toEqual(before);
  return result;
}

const send = (method: 'POST' | 'PUT' | 'PATCH', url: string, body: string | Buffer, headers: Record<string, string>) =>
  test.app
    .inject({ method, url, headers: { 'x-api-key': test.adminKey, ...headers }, payload: body })
    .then((response) => ({
      status: response.statusCode,
      headers: response.headers,
      text: response.body,
      json: String(response.headers['content-type']).includes('json') ? JSON.parse(response.body) : undefined,
      mediaType: String(response.headers['content-type'] ?? '')
        .split(';')[0]!
        .trim(),
    }));

const manyAttributes = `<user ${Array.from({ length: 90_000 }, (_, index) => `a${index}="1"`).join(' ')}><name>x</name><email>many@example.com</email></user>`;

describe('XML bodies', () => {
  it.each([
    // Refused at the first: rowi's XML has no attributes but nil and namespace declarations.
    ['90,000 attributes on one element (a CPU amplifier)', manyAttributes, 'malformed-body'],
    ['250,000 tiny elements (a megabyte)', `<user>${'<a/>'.repeat(250_000)}</user>`, 'body-too-complex'],
    ['a megabyte of comments', `<user>${'<!-- c -->'.repeat(100_000)}</user>`, 'body-too-complex'],
    [
      'an element named __proto__',
      '<user><__proto__>x</__proto__><name>x</name><email>proto@example.com</email></user>',
      'malformed-body',
    ],
    [
      'an element named constructor',
      '<user><name>x</name><email>c@example.com</email><constructor>1</constructor></user>',
      'malformed-body',
    ],
    [
      'nesting of 150 hidden behind attribute values holding "/>"',
      `<user>${'<a xmlns:x="/>">'.repeat(150)}${'</a>'.repeat(150)}</user>`,
      'body-too-deep',
    ],
    [
      'nesting of 150 with comments between the levels',
      `<user>${'<a><!-- -->'.repeat(150)}${'</a>'.repeat(150)}</user>`,
      'body-too-deep',
    ],
    ['a NUL as &#0;', '<user><name>a&#0;b</name><email>nul@example.com</email></user>', 'malformed-body'],
    [
      'a NUL as &#x0; in an attribute',
      '<user x="&#x0;"><name>a</name><email>nul2@example.com</email></user>',
      'malformed-body',
    ],
    [
      'a reference to a lone surrogate',
      '<user><name>&#xD800;</name><email>s@example.com</email></user>',
      'malformed-body',
    ],
    ['an undefined entity', '<user><name>&copy;</name><email>e@example.com</email></user>', 'malformed-body'],
    ['a raw control character', '<user><name>a\u0002b</name><email>r@example.com</email></user>', 'malformed-body'],
  ])('POST /v1/users: 400 %s, nothing stored, when the body is %s', async (_case, body, type) => {
    const reply = await unchanged(() => send('POST', '/v1/users', body, XML));
    expectProblem(reply, 400, type);
  });

  it('POST /v1/users: 201 and the named characters stored when the XML uses character references', async () => {
    const reply = await send(
      'POST',
      '/v1/users',
      '<user><name>Ad&#97; &#x1F600; &amp;#65;</name><email>refs@example.com</email></user>',
      XML,
    );
    expect(reply.status).toBe(201);
    expect(reply.json.name).toBe('Ada 😀 &#65;');
    const [row] = (await storedUsers(test)).filter((user) => user.email === 'refs@example.com');
    expect(row?.name).toBe('Ada 😀 &#65;');
  });

  /** Shapes XML bodies take, well-formed or not (a few are valid documents of some route: a PATCH of nothing). */
  const SHAPES = [
    'text only',
    '<root/>',
    '<root></root>',
    '<root>text</root>',
    '<root><a>1</a><a>2</a></root>',
    '<root><name><i>1</i></name></root>',
    '<root a="1" b="2"><name>x</name></root>',
    '<x:root xmlns:x="urn:x"><x:name>x</x:name></x:root>',
    '<root xml:lang="en"><name>x</name></root>',
    '<root><name nil="true"/><email nil="true"/></root>',
    '<root/><root/>',
    '\ufeff<root><name>x</name></root>',
    '<root>\r\n<name>x</name>\r\n</root>',
    '<root><name>x</name>',
    '<!-- only a comment -->',
    '<?xml version="1.0"?>',
    '<root><lines><line><item_id>1e400</item_id></line></lines></root>',
    '<root><lines>text</lines></root>',
    '<root><lines><line>text</line></lines></root>',
    '<root><quantity>-1e400</quantity></root>',
    '<root>&amp;</root>',
    '<root><name><![CDATA[x]]></name></root>',
    '<root><name>x</name><name>y</name></root>',
    '<root><quantity nil="true"/></root>',
  ];

  it('POST, PUT and PATCH of every resource: never a 5xx for any shape; every refusal a 4xx problem that changed nothing stored', async () => {
    const targets: ['POST' | 'PUT' | 'PATCH', string][] = [
      ['POST', '/v1/users'],
      ['PATCH', `/v1/users/${userId}`],
      ['POST', '/v1/items'],
      ['PUT', `/v1/items/${itemId}`],
      ['PUT', `/v1/items/${itemId}/stock`],
      ['POST', '/v1/orders'],
      ['POST', '/v1/callers'],
      ['PATCH', '/v1/callers/1'],
      ['PUT', '/v1/weather/bodies'],
      ['PATCH', '/v1/weather/bodies'],
    ];
    for (const [method, url] of targets) {
      for (const shape of SHAPES) {
        const before = await stored();
        const reply = await send(method, url, shape, XML);
        const what = `${method} ${url} ${JSON.stringify(shape)} → ${reply.status} ${reply.text}`;
        expect(reply.status, what).toBeLessThan(500);
        if (reply.status < 400) continue;
        expect(reply.mediaType, what).toBe('application/problem+json');
        expect(await stored(), what).toEqual(before);
      }
    }
  });
});

describe('text in JSON bodies', () => {
  it.each([
    ['a NUL in a value', '{"name":"a\\u0000b","email":"nul@example.com"}', '#/name', /NUL character/],
    [
      'a NUL in a member name',
      '{"name":"a","email":"nul@example.com","x\\u0000":1}',
      '#/x',
      /its name contains a NUL character/,
    ],
    ['a lone high surrogate', '{"name":"a\\ud800b","email":"s1@example.com"}', '#/name', /lone surrogate/],
    ['a lone low surrogate', '{"name":"a\\udc00","email":"s2@example.com"}', '#/name', /lone surrogate/],
    ['surrogates in the wrong order', '{"name":"\\ude00\\ud83d","email":"s3@example.com"}', '#/name', /lone surrogate/],
  ])(
    'POST /v1/users: 400 malformed-body naming where, nothing stored, when the JSON has %s',
    async (_case, body, pointer, detail) => {
      const reply = await unchanged(() => send('POST', '/v1/users', body, JSON_TYPE));
      const problem = expectProblem(reply, 400, 'malformed-body');
      expect(problem.errors?.[0]?.pointer.startsWith(pointer)).toBe(true);
      expect(problem.detail).toMatch(detail);
    },
  );

  it('PATCH /v1/users/{id} (merge patch) and PUT /v1/weather/{place}: 400 when a value holds a NUL; nothing changed', async () => {
    await unchanged(async () => {
      expectProblem(
        await send('PATCH', `/v1/users/${userId}`, '{"name":"\\u0000"}', {
          'content-type': 'application/merge-patch+json',
        }),
        400,
        'malformed-body',
      );
      expectProblem(
        await send('PUT', '/v1/weather/bodies', JSON.stringify(buildObservation({ source: 'feed\u0000' })), JSON_TYPE),
        400,
        'malformed-body',
      );
    });
  });

  it('POST /v1/users: 201 with the character stored when the JSON escapes a surrogate pair', async () => {
    const reply = await send(
      'POST',
      '/v1/users',
      '{"name":"Smile \\ud83d\\ude00","email":"pair@example.com"}',
      JSON_TYPE,
    );
    expect(reply.status).toBe(201);
    expect(reply.json.name).toBe('Smile 😀');
  });

  it.each([
    [
      'a byte 0xFF',
      Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff]), Buffer.from('","email":"utf@example.com"}')]),
      10,
    ],
    [
      'an overlong NUL (C0 80)',
      Buffer.concat([
        Buffer.from('{"name":"a'),
        Buffer.from([0xc0, 0x80]),
        Buffer.from('","email":"utf2@example.com"}'),
      ]),
      10,
    ],
    [
      'an encoded surrogate (ED A0 80)',
      Buffer.concat([
        Buffer.from('{"name":"a'),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from('","email":"utf3@example.com"}'),
      ]),
      10,
    ],
    [
      'a character cut off at the end',
      Buffer.concat([Buffer.from('{"name":"a","email":"utf4@example.com"}'), Buffer.from([0xe2, 0x82])]),
      39,
    ],
  ])(
    'POST /v1/users: 400 malformed-body at its offset, nothing stored, when the JSON holds %s (it was stored as U+FFFD)',
    async (_case, body, offset) => {
      const reply = await unchanged(() => send('POST', '/v1/users', body, JSON_TYPE));
      const problem = expectProblem(reply, 400, 'malformed-body');
      expect(problem.detail).toMatch(new RegExp(`not valid UTF-8: the bytes at offset ${offset}`));
    },
  );

  it('POST /v1/users: 400 malformed-body, nothing stored, when an XML body is not UTF-8', async () => {
    const body = Buffer.concat([
      Buffer.from('<user><name>a'),
      Buffer.from([0xfe]),
      Buffer.from('</name><email>x8@example.com</email></user>'),
    ]);
    expectProblem(await unchanged(() => send('POST', '/v1/users', body, XML)), 400, 'malformed-body');
  });

  it('POST /v1/users: 201 when a JSON or XML body starts with a UTF-8 byte order mark, which is skipped', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    expect(
      (await send('POST', '/v1/users', Buffer.concat([bom, Buffer.from(JSON.stringify(buildUser()))]), JSON_TYPE))
        .status,
    ).toBe(201);
    expect(
      (
        await send(
          'POST',
          '/v1/users',
          Buffer.concat([bom, Buffer.from('<user><name>Bom</name><email>bom@example.com</email></user>')]),
          XML,
        )
      ).status,
    ).toBe(201);
  });
});

describe('bodies larger than any document of rowi', () => {
  it.each([
    [
      'an object of 100,000 members',
      JSON.stringify(Object.fromEntries(Array.from({ length: 95_000 }, (_, index) => [`k${index}`, 1]))),
      '/v1/users',
    ],
    [
      'an order of 100,000 lines',
      JSON.stringify({ name: 'x', user_id: 1, lines: Array.from({ length: 100_000 }, () => ({})) }),
      '/v1/orders',
    ],
  ])('POST %s: 400 body-too-complex before it is parsed, nothing stored', async (_case, body, url) => {
    expectProblem(await unchanged(() => send('POST', url, body, JSON_TYPE)), 400, 'body-too-complex');
  });

  it('POST /v1/users: 422 listing the first 50 of 60 unknown members, and saying how many there were', async () => {
    const body = {
      ...buildUser(),
      ...Object.fromEntries(Array.from({ length: 60 }, (_, index) => [`extra${index}`, 1])),
    };
    const problem = expectProblem(
      await unchanged(() => send('POST', '/v1/users', JSON.stringify(body), JSON_TYPE)),
      422,
      'validation-failed',
    );
    expect(problem.errors).toHaveLength(50);
    expect(problem.detail).toBe('The body has 60 invalid fields; the first 50 are listed.');
  });

  it('POST /v1/orders: 422 naming the first violation only when the body holds thousands of values', async () => {
    const body = { name: 'x', user_id: userId, lines: Array.from({ length: 3000 }, () => ({ item_id: 'one' })) };
    const problem = expectProblem(
      await unchanged(() => send('POST', '/v1/orders', JSON.stringify(body), JSON_TYPE)),
      422,
      'validation-failed',
    );
    expect(problem.errors).toHaveLength(1);
  });
});

describe('NUL in query strings', () => {
  it.each([
    ['/v1/users?email=%00', '#/email'],
    ['/v1/users?name=a%00b', '#/name'],
    ['/v1/items?sku=%00', '#/sku'],
    ['/v1/orders?status=%00', '#/status'],
    ['/v1/callers?name=%00', '#/name'],
    ['/v1/weather?name=%00', '#/name'],
    ['/v1/audit-events?resource=%00', '#/resource'],
    ['/v1/users?x%00=1', '#/x'],
  ])('GET %s: 400 invalid-query naming the parameter', async (url, pointer) => {
    const reply = await test.call({ url });
    const problem = expectProblem(reply, 400, 'invalid-query');
    expect(problem.errors).toEqual([
      { in: 'query', pointer, detail: 'contains a NUL character (%00), which rowi refuses in any text' },
    ]);
  });
});
