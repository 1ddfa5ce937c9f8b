import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { parseXmlBody, type XmlSchema } from '../../src/http/xml.js';
import { scanXml, XML_LIMITS } from '../../src/http/xml-scan.js';

/**
 * The XML reader on its own: scanXml's limits and refusals, the mapping parseXmlBody restores, and
 * that no body of any shape makes it throw anything but a 400 problem.
 */
const USER: XmlSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, email: { type: 'string' } },
  xml: { name: 'user' },
};

function refusal(text: string): { type: string; detail: string } | undefined {
  try {
    parseXmlBody(text, USER);
    return undefined;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return { type: error.type, detail: error.message };
  }
}

describe('scanXml', () => {
  it.each([
    [
      '150 levels hidden behind attribute values holding "/>"',
      `<user>${'<a xmlns:x="/>">'.repeat(150)}${'</a>'.repeat(150)}</user>`,
    ],
    [
      '150 levels with a comment after each open tag',
      `<user>${'<a><!-- > -->'.repeat(150)}${'</a>'.repeat(150)}</user>`,
    ],
    [
      '150 levels with CDATA holding "</a>" after each open tag',
      `<user>${'<a><![CDATA[</a>]]>'.repeat(150)}${'</a>'.repeat(150)}</user>`,
    ],
    [
      '150 levels with processing instructions holding ">"',
      `<user>${'<a><?pi > ?>'.repeat(150)}${'</a>'.repeat(150)}</user>`,
    ],
    [
      '150 levels with single-quoted attributes holding ">"',
      `<user>${"<a xmlns:y='>' xmlns:z='/>'>".repeat(150)}${'</a>'.repeat(150)}</user>`,
    ],
  ])('refuses nesting past 32 levels however it is written: %s', (_case, text) => {
    expect(refusal(text)).toMatchObject({ type: 'body-too-deep' });
  });

  it('accepts exactly 32 levels', () => {
    expect(() => scanXml(`${'<a>'.repeat(XML_LIMITS.depth)}${'</a>'.repeat(XML_LIMITS.depth)}`)).not.toThrow();
    expect(() => scanXml(`${'<a>'.repeat(XML_LIMITS.depth + 1)}${'</a>'.repeat(XML_LIMITS.depth + 1)}`)).toThrow(
      /deeper than 32/,
    );
  });

  it.each([
    [
      '90,000 attributes on one element',
      `<user ${Array.from({ length: 90_000 }, (_, index) => `xmlns:a${index}="urn:a"`).join(' ')}/>`,
      /more than 16 attributes/,
    ],
    [
      '17 attributes on one element',
      `<user ${Array.from({ length: 17 }, (_, index) => `xmlns:a${index}="urn:a"`).join(' ')}/>`,
      /more than 16 attributes/,
    ],
    ['2,001 elements', `<user>${'<a/>'.repeat(2000)}</user>`, /more than 2000 elements/],
    [
      '2,001 attributes over many elements',
      `<user>${'<a nil="true"/>'.repeat(2001)}</user>`,
      /more than 2000 (elements|attributes)/,
    ],
    ['a megabyte of text', `<user><name>${'x'.repeat(1_000_000)}</name></user>`, /KiB of text/],
    ['a megabyte of comments', `<user>${'<!-- c -->'.repeat(100_000)}</user>`, /KiB of text/],
    ['long attribute values', `<user xmlns:a="${'x'.repeat(200_000)}"/>`, /KiB of text/],
  ])('refuses %s with body-too-complex', (_case, text, detail) => {
    const refused = refusal(text);
    expect(refused?.type).toBe('body-too-complex');
    expect(refused?.detail).toMatch(detail);
  });

  it('accepts 16 attributes and 2,000 elements', () => {
    expect(() =>
      scanXml(`<user ${Array.from({ length: 16 }, (_, index) => `xmlns:a${index}="urn:a"`).join(' ')}/>`),
    ).not.toThrow();
    expect(() => scanXml(`<user>${'<a/>'.repeat(1999)}</user>`)).not.toThrow();
  });

  it.each([
    ['an element named __proto__', '<user><__proto__>x</__proto__></user>'],
    ['an element named constructor', '<user><constructor>x</constructor></user>'],
    ['an element named prototype', '<user><prototype/></user>'],
    ['a prefixed element named x:__proto__', '<user xmlns:x="urn:x"><x:__proto__>1</x:__proto__></user>'],
    ['an attribute named __proto__', '<user __proto__="1"><name>x</name></user>'],
  ])('refuses %s with malformed-body', (_case, text) => {
    expect(refusal(text)).toMatchObject({
      type: 'malformed-body',
      detail: expect.stringMatching(/__proto__, constructor and prototype are refused/),
    });
  });

  it.each([
    ['&#0; in text', '<user><name>a&#0;b</name></user>', /NUL character/],
    ['&#x0000; in an attribute', '<user xmlns:a="&#x0000;"><name>a</name></user>', /NUL character/],
    ['a raw NUL', '<user><name>a\u0000b</name></user>', /NUL character/],
    ['a raw U+0001', '<user><name>a\u0001b</name></user>', /U\+0001, which XML 1.0 does not allow/],
    ['a raw U+FFFE', '<user><name>a\ufffeb</name></user>', /U\+FFFE/],
    ['a reference to U+0008', '<user><name>&#8;</name></user>', /&#8; to the character U\+0008/],
    ['a reference to a surrogate', '<user><name>&#xD800;</name></user>', /U\+D800/],
    ['a reference past U+10FFFF', '<user><name>&#x110000;</name></user>', /U\+110000/],
    ['an undefined entity', '<user><name>&nbsp;</name></user>', /entity &nbsp;, which is not defined/],
  ])('refuses %s with malformed-body', (_case, text, detail) => {
    const refused = refusal(text);
    expect(refused?.type).toBe('malformed-body');
    expect(refused?.detail).toMatch(detail);
  });

  it('reads character references as the characters they name, and &amp; once', () => {
    expect(
      parseXmlBody('<user><name>&#65;&#x42;&#x1F600; &amp;#65; &lt;&gt;</name><email>&#x61;@b.c</email></user>', USER),
    ).toEqual({
      name: 'AB😀 &#65; <>',
      email: 'a@b.c',
    });
  });

  it('leaves CDATA as written', () => {
    expect(parseXmlBody('<user><name><![CDATA[&#65; <b>]]></name></user>', USER)).toEqual({ name: '&#65; <b>' });
  });
});

const ORDER: XmlSchema = {
  type: 'object',
  xml: { name: 'order' },
  properties: {
    name: { type: 'string' },
    user_id: { type: 'integer' },
    lines: {
      type: 'array',
      items: {
        type: 'object',
        xml: { name: 'line' },
        properties: { item_id: { type: 'integer' }, quantity: { type: 'integer' } },
      },
    },
  },
};

/** The problem parseXmlBody throws for an order body, or undefined. */
function orderRefusal(text: string): { status: number; type: string; detail: string; errors?: unknown } | undefined {
  try {
    parseXmlBody(text, ORDER);
    return undefined;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return { status: error.status, type: error.type, detail: error.message, errors: error.errors };
  }
}

describe('element names, attributes and the declaration', () => {
  it.each([
    ["another resource's root", '<item><name>x</name></item>', '#', /<item>; the root element must be <order>/],
    [
      'a root of no resource',
      '<document><name>x</name></document>',
      '#',
      /<document>; the root element must be <order>/,
    ],
    [
      'items of a list named otherwise',
      '<order><lines><item><item_id>1</item_id><quantity>1</quantity></item></lines></order>',
      '#/lines',
      /<item>; each item of lines is an element <line>/,
    ],
    [
      'one item of a list named otherwise',
      '<order><lines><line><item_id>1</item_id><quantity>1</quantity></line><i><item_id>2</item_id></i></lines></order>',
      '#/lines',
      /<i>; each item of lines is an element <line>/,
    ],
  ])('refuses %s with 422 naming where', (_case, text, pointer, detail) => {
    expect(orderRefusal(text)).toMatchObject({
      status: 422,
      type: 'validation-failed',
      errors: [{ in: 'body', pointer, detail: expect.stringMatching(detail) }],
    });
  });

  it.each([
    ['an id attribute on the root', '<order id="7"><name>x</name></order>', /an attribute id on <order>/],
    ['an attribute on a member', '<order><name lang="en">x</name></order>', /an attribute lang on <name>/],
    [
      'an attribute on an item of a list',
      '<order><lines><line quantity="5"><item_id>1</item_id></line></lines></order>',
      /an attribute quantity on <line>/,
    ],
    ['xml:lang', '<order xml:lang="en"><name>x</name></order>', /an attribute xml:lang on <order>/],
    ['nil="false"', '<order><name nil="false">x</name></order>', /nil="false" \(nil may only be "true"/],
    [
      'an encoding other than UTF-8',
      '<?xml version="1.0" encoding="ISO-8859-1"?><order><name>x</name></order>',
      /encoding ISO-8859-1; rowi reads XML bodies in UTF-8 only/,
    ],
    ['UTF-16 declared', "<?xml version='1.0' encoding='UTF-16'?><order/>", /encoding UTF-16/],
    ['XML 1.1', '<?xml version="1.1"?><order><name>x</name></order>', /version 1.1; rowi reads XML 1.0 only/],
  ])('refuses %s with 400 malformed-body naming it', (_case, text, detail) => {
    expect(orderRefusal(text)).toMatchObject({
      status: 400,
      type: 'malformed-body',
      detail: expect.stringMatching(detail),
    });
  });

  it.each([
    ['a UTF-8 declaration', '<?xml version="1.0" encoding="UTF-8"?><order><name>x</name></order>', { name: 'x' }],
    [
      'a lower-case utf-8 declaration, single-quoted',
      "<?xml version='1.0' encoding='utf-8' standalone='yes'?><order><name>x</name></order>",
      { name: 'x' },
    ],
    ['a default namespace', '<order xmlns="urn:example"><name>x</name></order>', { name: 'x' }],
    [
      'nil="true", prefixed',
      '<order xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><name xsi:nil="true"/></order>',
      { name: null },
    ],
    [
      'a list of lines',
      '<order><lines><line><item_id>1</item_id><quantity>2</quantity></line></lines></order>',
      { lines: [{ item_id: 1, quantity: 2 }] },
    ],
  ])('reads %s', (_case, text, value) => {
    expect(parseXmlBody(text, ORDER)).toEqual(value);
  });

  it.each(['0x10', '1e1', '0b11', '5.0', '+5', '05', ' 5x'])(
    'leaves an integer written %s as text, for validation to refuse',
    (written) => {
      expect(parseXmlBody(`<order><user_id>${written}</user_id></order>`, ORDER)).toEqual({ user_id: written.trim() });
    },
  );
});

/** Fragments whose concatenations cover what an XML body can be, well-formed or not. */
const FRAGMENTS = [
  '<user>',
  '</user>',
  '<name>',
  '</name>',
  '<email>',
  '</email>',
  '<a>',
  '</a>',
  '<a/>',
  '<i>',
  '</i>',
  '<x:a xmlns:x="urn:x">',
  '</x:a>',
  '<__proto__>',
  '</__proto__>',
  '<constructor>',
  '<a x="/>">',
  "<a y='>'>",
  '<a nil="true"/>',
  '<name nil="true"/>',
  '<!--',
  '-->',
  '<!-- c -->',
  '<![CDATA[',
  ']]>',
  '<?pi x?>',
  '<?xml version="1.0"?>',
  '<!DOCTYPE',
  '<!ENTITY',
  'text',
  ' ',
  '\r\n',
  '\ufeff',
  '&amp;',
  '&lt;',
  '&#65;',
  '&#0;',
  '&#xD800;',
  '&foo;',
  '&',
  '<',
  '>',
  '"',
  "'",
  '=',
  '/',
  '\u0000',
  '\u0001',
  '😀',
  '42',
  '-1e400',
];

describe('parseXmlBody on any shape', () => {
  it('never throws anything but a 400 problem, or 422 for elements named otherwise than the schema names them, whatever the body (fast-check, seeded)', () => {
    const seed = Number(process.env.ROWI_TEST_FUZZ_SEED ?? 20261124);
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 40 }), (parts) => {
        const text = parts.join('');
        try {
          parseXmlBody(text, USER);
        } catch (error) {
          if (
            !(error instanceof AppError) ||
            !(error.status === 400 || (error.status === 422 && error.type === 'validation-failed'))
          )
            throw error;
        }
      }),
      { seed, numRuns: Number(process.env.ROWI_TEST_FUZZ_RUNS ?? 2000) },
    );
  });
});
