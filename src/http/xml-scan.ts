import { BadRequestError } from '../errors.js';

/**
 * What an XML body may hold, checked in one pass before any parsing work (docs/conventions.md).
 * rowi's largest document (an order of 100 lines) is a few levels deep, about 300 elements and a
 * few kilobytes of text, with at most two attributes an element (nil, xmlns). The validator and
 * the parser cost 70–100 ms a megabyte and far more for some shapes (90,000 attributes on one
 * element took 1.75 s of CPU), stalling every request of the process meanwhile; within these
 * bounds a document costs them a few milliseconds, and anything larger is refused by the scan.
 */
export const XML_LIMITS = {
  depth: 32,
  elements: 2000,
  attributesPerElement: 16,
  attributes: 2000,
  textCharacters: 128 * 1024,
} as const;

/** Names that would reach a JavaScript object as a key with a meaning of its own (prototype pollution). */
const RESERVED_NAMES = new Set(['__proto__', 'constructor', 'prototype']);
/** The entities XML predefines; any other needs a DTD, which rowi refuses. */
const PREDEFINED_ENTITIES = new Set(['lt', 'gt', 'amp', 'apos', 'quot']);

/**
 * One linear pass over an XML body, without building anything: counts nesting, elements and
 * attributes, and checks names, character references and characters, so that a hostile body
 * costs one scan and is refused before the validator or the parser start. It understands what
 * can hide markup from a naive scan: comments, CDATA sections, processing instructions and
 * quoted attribute values (`<a x="/>">` is one open element, not a self-closed one). Where the
 * body stops being well-formed it stops, and leaves the diagnosis to the validator.
 */
export function scanXml(text: string): void {
  let depth = 0;
  let elements = 0;
  let attributes = 0;
  let characters = 0;
  /** Text, attribute values, CDATA, comments and processing instructions, as written, count toward XML_LIMITS.textCharacters. */
  const checkText = (from: number, to: number, references: boolean) => {
    characters += to - from;
    if (characters > XML_LIMITS.textCharacters)
      throw tooComplex(`more than ${XML_LIMITS.textCharacters / 1024} KiB of text`);
    checkCharacters(text, from, to, references);
  };
  let index = 0;
  while (index < text.length) {
    const open = text.indexOf('<', index);
    checkText(index, open === -1 ? text.length : open, true);
    if (open === -1) return;
    const next = text.charCodeAt(open + 1);
    if (next === 33 /* ! */) {
      if (text.startsWith('<!--', open)) {
        const end = text.indexOf('-->', open + 4);
        if (end === -1) return;
        // Comments mean nothing to rowi, but the validator and the parser read them: they count.
        checkText(open + 4, end, false);
        index = end + 3;
      } else if (text.startsWith('<![CDATA[', open)) {
        const end = text.indexOf(']]>', open + 9);
        if (end === -1) return;
        // CDATA is literal: no references, but still only characters XML allows.
        checkText(open + 9, end, false);
        index = end + 3;
      } else {
        return;
      }
      continue;
    }
    if (next === 63 /* ? */) {
      const end = text.indexOf('?>', open + 2);
      if (end === -1) return;
      checkText(open + 2, end, false);
      if (/^<\?xml\s/.test(text.slice(open, open + 6))) checkDeclaration(text.slice(open + 5, end));
      index = end + 2;
      continue;
    }
    if (next === 47 /* / */) {
      const end = text.indexOf('>', open + 2);
      if (end === -1) return;
      depth--;
      index = end + 1;
      continue;
    }
    let position = endOfName(text, open + 1);
    if (position === open + 1) return;
    const element = text.slice(open + 1, position);
    checkName(element, 'element');
    if (++elements > XML_LIMITS.elements) throw tooComplex(`more than ${XML_LIMITS.elements} elements`);
    if (++depth > XML_LIMITS.depth) {
      throw new BadRequestError(
        `The XML body is nested deeper than ${XML_LIMITS.depth} levels.`,
        undefined,
        'body-too-deep',
      );
    }
    let own = 0;
    for (;;) {
      position = skipSpace(text, position);
      const char = text.charCodeAt(position);
      if (char === 62 /* > */) {
        position++;
        break;
      }
      if (char === 47 /* / */ && text.charCodeAt(position + 1) === 62) {
        depth--;
        position += 2;
        break;
      }
      const nameEnd = endOfName(text, position);
      if (nameEnd === position) return;
      const attribute = text.slice(position, nameEnd);
      checkName(attribute, 'attribute');
      if (++own > XML_LIMITS.attributesPerElement)
        throw tooComplex(`an element with more than ${XML_LIMITS.attributesPerElement} attributes`);
      if (++attributes > XML_LIMITS.attributes) throw tooComplex(`more than ${XML_LIMITS.attributes} attributes`);
      position = skipSpace(text, nameEnd);
      if (text.charCodeAt(position) !== 61 /* = */) return;
      position = skipSpace(text, position + 1);
      const quote = text[position];
      if (quote !== '"' && quote !== "'") return;
      const valueEnd = text.indexOf(quote, position + 1);
      if (valueEnd === -1) return;
      checkText(position + 1, valueEnd, true);
      checkAttribute(element, attribute, text.slice(position + 1, valueEnd));
      position = valueEnd + 1;
    }
    index = position;
  }
}

function endOfName(text: string, from: number): number {
  let position = from;
  for (; position < text.length; position++) {
    const char = text.charCodeAt(position);
    // whitespace, / > = and quotes end a name; anything else is the validator's to judge
    if (char <= 32 || char === 47 || char === 62 || char === 61 || char === 34 || char === 39) break;
  }
  return position;
}

function skipSpace(text: string, from: number): number {
  let position = from;
  while (position < text.length) {
    const char = text.charCodeAt(position);
    if (char !== 32 && char !== 9 && char !== 10 && char !== 13) break;
    position++;
  }
  return position;
}

function checkName(name: string, kind: 'element' | 'attribute'): void {
  // With namespace prefixes removed (x:__proto__ is read as __proto__), the local name is what counts.
  const local = name.slice(name.lastIndexOf(':') + 1);
  if (RESERVED_NAMES.has(local)) {
    throw new BadRequestError(
      `The XML body has an ${kind} named ${name}; the names __proto__, constructor and prototype are refused.`,
      undefined,
      'malformed-body',
    );
  }
}

/**
 * rowi's XML carries every value in an element (the mapping of xml.ts); the only attributes it
 * reads are `nil="true"` (null) and namespace declarations. Any other (an `id="7"`, an
 * `xml:lang`) would be dropped unread, so the caller would believe it sent what rowi never took:
 * refused, named.
 */
function checkAttribute(element: string, attribute: string, value: string): void {
  if (attribute === 'xmlns' || attribute.startsWith('xmlns:')) return;
  const local = attribute.slice(attribute.lastIndexOf(':') + 1);
  if (local === 'nil' && value.trim() === 'true') return;
  const why = local === 'nil' ? `nil="${value}" (nil may only be "true", for null)` : `an attribute ${attribute}`;
  throw new BadRequestError(
    `The XML body has ${why} on <${element}>; rowi's XML holds values in elements only (the one attribute it reads is nil="true", besides namespace declarations).`,
    [{ in: 'body', pointer: '#', detail: `<${element}> has ${why}` }],
    'malformed-body',
  );
}

/**
 * The XML declaration: rowi reads bodies as UTF-8 (decoded before they are parsed) and by the
 * rules of XML 1.0. A declaration of another encoding or version would be ignored, so the body
 * would be read otherwise than its sender wrote it: refused, named.
 */
function checkDeclaration(declaration: string): void {
  const encoding = /\sencoding\s*=\s*(["'])([^"']*)\1/.exec(declaration)?.[2];
  if (encoding !== undefined && encoding.toLowerCase() !== 'utf-8') {
    throw new BadRequestError(
      `The XML declaration names the encoding ${encoding}; rowi reads XML bodies in UTF-8 only: send UTF-8 and declare encoding="UTF-8" or none.`,
      [{ in: 'body', pointer: '#', detail: `declares encoding="${encoding}"` }],
      'malformed-body',
    );
  }
  const version = /\sversion\s*=\s*(["'])([^"']*)\1/.exec(declaration)?.[2];
  if (version !== undefined && version !== '1.0') {
    throw new BadRequestError(
      `The XML declaration names version ${version}; rowi reads XML 1.0 only: declare version="1.0".`,
      [{ in: 'body', pointer: '#', detail: `declares version="${version}"` }],
      'malformed-body',
    );
  }
}

/**
 * Text and attribute values hold only characters XML 1.0 allows (no C0 control but tab, line feed
 * and carriage return; not U+FFFE or U+FFFF), and, where `references` is true, only the five
 * predefined entities and character references to allowed characters. NUL gets a problem of its
 * own wording: rowi refuses it in any text (PostgreSQL cannot store it).
 */
function checkCharacters(text: string, from: number, to: number, references: boolean): void {
  for (let position = from; position < to; position++) {
    const char = text.charCodeAt(position);
    if (char === 38 /* & */ && references) {
      const semicolon = text.indexOf(';', position + 1);
      // A bare & is not well-formed: the validator says so.
      if (semicolon === -1 || semicolon > position + 12) continue;
      checkReference(text.slice(position + 1, semicolon));
      position = semicolon;
    } else if ((char < 32 && char !== 9 && char !== 10 && char !== 13) || char === 0xfffe || char === 0xffff) {
      throw notAllowed(char);
    }
  }
}

function checkReference(name: string): void {
  if (name.startsWith('#')) {
    const hex = name[1] === 'x';
    const digits = name.slice(hex ? 2 : 1);
    if (!(hex ? /^[0-9A-Fa-f]{1,8}$/ : /^\d{1,10}$/).test(digits)) return;
    const code = Number.parseInt(digits, hex ? 16 : 10);
    const allowed =
      code === 9 ||
      code === 10 ||
      code === 13 ||
      (code >= 0x20 && code <= 0xd7ff) ||
      (code >= 0xe000 && code <= 0xfffd) ||
      (code >= 0x10000 && code <= 0x10ffff);
    if (!allowed) throw notAllowed(code, `&${name};`);
    return;
  }
  if (!PREDEFINED_ENTITIES.has(name)) {
    throw new BadRequestError(
      `The XML body refers to the entity &${name};, which is not defined: XML without a DTD has only &lt; &gt; &amp; &apos; &quot; (use a character reference such as &#160; instead).`,
      undefined,
      'malformed-body',
    );
  }
}

function notAllowed(code: number, written?: string): BadRequestError {
  const character = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  if (code === 0)
    return new BadRequestError(
      `The XML body contains a NUL character (U+0000${written ? `, written ${written}` : ''}); rowi refuses NUL in any text.`,
      undefined,
      'malformed-body',
    );
  return new BadRequestError(
    `The XML body contains ${written ? `a reference ${written} to ` : ''}the character ${character}, which XML 1.0 does not allow.`,
    undefined,
    'malformed-body',
  );
}

function tooComplex(what: string): BadRequestError {
  return new BadRequestError(
    `The XML body has ${what}; rowi reads at most ${XML_LIMITS.elements} elements, ${XML_LIMITS.attributesPerElement} attributes an element, ${XML_LIMITS.attributes} attributes in all and ${XML_LIMITS.textCharacters / 1024} KiB of text.`,
    undefined,
    'body-too-complex',
  );
}
