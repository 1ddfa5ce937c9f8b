import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { BadRequestError, UnprocessableError } from '../errors.js';
import { DECIMAL_INTEGER } from './number-text.js';
import { branchFor } from './schema-branches.js';
import { scanXml } from './xml-scan.js';

/**
 * The XML representation maps the JSON one one-to-one, guided by the same schema:
 *
 * - an object is an element whose children are its members, in schema order;
 * - an array is an element whose children are its items, each named by the item schema's
 *   `xml.name` (OpenAPI's XML Object) or `i` (as RFC 9457 Appendix B does for problems);
 * - a string, number or boolean is the element's text; `null` is an empty element with
 *   `nil="true"`;
 * - the root element is named by the schema's `xml.name`.
 *
 * Reading XML uses the schema to restore types (text "42" where an integer is expected becomes
 * 42), so the mapping is reversible. Leading and trailing whitespace of text is not significant.
 */
export interface XmlSchema {
  type?: string | string[];
  properties?: Record<string, XmlSchema>;
  items?: XmlSchema;
  anyOf?: XmlSchema[];
  additionalProperties?: boolean | XmlSchema;
  xml?: { name?: string; namespace?: string };
}

const ITEM = 'i';
const NIL = 'nil';

/** Builds the XML writer for one schema; the root element takes the schema's XML name. */
export function compileXmlSerializer(schema: XmlSchema, fallbackRoot = 'response'): (value: unknown) => string {
  const root = schema.xml?.name ?? fallbackRoot;
  const namespace = schema.xml?.namespace;
  return (value) => {
    const parts: string[] = ['<?xml version="1.0" encoding="UTF-8"?>\n'];
    writeElement(parts, root, value, schema, namespace);
    return parts.join('');
  };
}

/**
 * Builds the writer of one element named by the schema's XML name, without the XML declaration:
 * for an answer streamed a record at a time inside a root its route writes.
 */
export function compileXmlElementWriter(schema: XmlSchema): (value: unknown) => string {
  const name = schema.xml?.name ?? ITEM;
  return (value) => {
    const parts: string[] = [];
    writeElement(parts, name, value, schema);
    return parts.join('');
  };
}

function writeElement(
  parts: string[],
  name: string,
  value: unknown,
  schema: XmlSchema | undefined,
  namespace?: string,
): void {
  const open = namespace ? `<${name} xmlns="${escapeXml(namespace)}"` : `<${name}`;
  if (value === null || value === undefined) {
    parts.push(`${open} ${NIL}="true"/>`);
    return;
  }
  const shape = concrete(schema, value);
  if (Array.isArray(value)) {
    parts.push(`${open}>`);
    const itemName = shape?.items?.xml?.name ?? ITEM;
    for (const item of value) writeElement(parts, itemName, item, shape?.items);
    parts.push(`</${name}>`);
    return;
  }
  if (typeof value === 'object') {
    parts.push(`${open}>`);
    const record = value as Record<string, unknown>;
    // Like the JSON serializer: declared members in schema order, then any others the schema
    // allows (problem extensions); a closed schema writes nothing it does not declare.
    const declared = shape?.properties ? Object.keys(shape.properties) : [];
    const allowsOthers = shape?.additionalProperties !== false;
    const keys = allowsOthers
      ? [...declared, ...Object.keys(record).filter((key) => !declared.includes(key))]
      : declared;
    for (const key of keys) {
      if (record[key] !== undefined) writeElement(parts, key, record[key], shape?.properties?.[key]);
    }
    parts.push(`</${name}>`);
    return;
  }
  parts.push(`${open}>${escapeXml(String(value))}</${name}>`);
}

/** The schema branch that describes a value (for `anyOf`: a nullable field, or an operation that is an import or a backup). */
function concrete(schema: XmlSchema | undefined, value: unknown): XmlSchema | undefined {
  if (!schema?.anyOf) return schema;
  return branchFor(schema.anyOf, value) ?? schema.anyOf.find((branch) => branch.type !== 'null');
}

// XML 1.0 cannot carry C0 controls other than tab, LF and CR, nor U+FFFE/U+FFFF, even escaped.
// eslint-disable-next-line no-control-regex
const NOT_XML_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g;
const XML_SPECIAL = /[&<>"']/g;
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

export function escapeXml(text: string): string {
  return text.replace(NOT_XML_CHAR, '\uFFFD').replace(XML_SPECIAL, (char) => ESCAPES[char]!);
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  removeNSPrefix: true,
  processEntities: true,
  // Decodes character references (&#65; &#x1F600;), which XML requires; without it they stay
  // text. Its named HTML entities (&nbsp;) never reach it: scanXml refuses every entity but XML's five.
  htmlEntities: true,
});

/**
 * Parses an XML request body into the JSON value it maps to. Refuses, before parsing, any DOCTYPE
 * or entity declaration (XXE and entity-expansion bombs are then impossible whatever the parser
 * does) and whatever scanXml refuses (xml-scan.ts); then malformed XML.
 */
export function parseXmlBody(text: string, schema: XmlSchema | undefined): unknown {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) {
    throw new BadRequestError(
      'XML with a DOCTYPE or entity declarations is refused.',
      undefined,
      'xml-doctype-refused',
    );
  }
  scanXml(text);
  const verdict = XMLValidator.validate(text, { allowBooleanAttributes: false });
  if (verdict !== true) {
    const { msg, line, col } = verdict.err;
    throw new BadRequestError(
      `The body is not well-formed XML: ${msg} (line ${line}, column ${col}).`,
      undefined,
      'malformed-body',
    );
  }
  let document: Record<string, unknown>;
  try {
    document = parser.parse(text) as Record<string, unknown>;
  } catch (error) {
    // scanXml and the validator leave nothing the parser refuses; should they ever, it is still the body's fault.
    throw new BadRequestError(
      `The body is not XML rowi can read: ${(error as Error).message}.`,
      undefined,
      'malformed-body',
    );
  }
  const roots = Object.keys(document);
  // Two root elements of one name come back from the parser as an array under that name.
  if (roots.length !== 1 || Array.isArray(document[roots[0]!])) {
    throw new BadRequestError('The XML body must have exactly one root element.', undefined, 'malformed-body');
  }
  const expected = schema?.xml?.name;
  // The root names the representation: a <item> sent to users is not a user with other fields.
  if (expected !== undefined && roots[0] !== expected)
    throw wrongElement('#', roots[0]!, `the root element must be <${expected}>`);
  return restoreTypes(document[roots[0]!], schema, '');
}

/** 422 naming where an element of another name stands where the schema names one (xml.name). */
function wrongElement(pointer: string, found: string, rule: string): UnprocessableError {
  const detail = `is an element <${found}>; ${rule}`;
  return new UnprocessableError(`The XML body is invalid: ${pointer} ${detail}.`, [{ in: 'body', pointer, detail }]);
}

function restoreTypes(node: unknown, schema: XmlSchema | undefined, pointer: string): unknown {
  if (isRecord(node) && node[`@${NIL}`] === 'true') return null;
  const value = withoutAttributes(node);
  const shape = schema?.anyOf ? schema.anyOf.find((branch) => branch.type !== 'null') : schema;
  if (!shape) return value;
  switch (shape.type) {
    case 'object':
      if (value === '') return {};
      if (!isRecord(value)) return value;
      return Object.fromEntries(
        Object.entries(value).map(([key, member]) => [
          key,
          restoreTypes(member, shape.properties?.[key], `${pointer}/${key}`),
        ]),
      );
    case 'array': {
      if (value === '') return [];
      const itemName = shape.items?.xml?.name ?? ITEM;
      if (!isRecord(value)) return value;
      const other = Object.keys(value).find((key) => key !== itemName);
      if (other !== undefined)
        throw wrongElement(
          `#${pointer}`,
          other,
          `each item of ${pointer.slice(1) || 'the list'} is an element <${itemName}>`,
        );
      const items = value[itemName];
      return (Array.isArray(items) ? items : [items]).map((item, index) =>
        restoreTypes(item, shape.items, `${pointer}/${index}`),
      );
    }
    case 'integer':
      return typeof value === 'string' && INTEGER.test(value) ? Number(value) : value;
    case 'number':
      return typeof value === 'string' && JSON_NUMBER.test(value) ? Number(value) : value;
    case 'boolean':
      return value === 'true' ? true : value === 'false' ? false : value;
    default:
      return value;
  }
}

/** A number as JSON writes it; an integer in decimal digits only, as everywhere rowi reads one as text (number-text.ts). */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const INTEGER = new RegExp(DECIMAL_INTEGER);

function withoutAttributes(node: unknown): unknown {
  if (!isRecord(node)) return node;
  const members = Object.entries(node).filter(([key]) => !key.startsWith('@'));
  if (members.length === 0) return '';
  if (members.length === 1 && members[0]![0] === '#text') return members[0]![1];
  return Object.fromEntries(members);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
