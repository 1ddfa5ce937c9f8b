import type { Format } from './negotiate.js';

/**
 * Strong entity tags (RFC 9110 §8.8.3) derived from a record's stored version. A strong tag
 * names one exact representation, so the XML representation of a version has its own tag;
 * for If-Match both tags of the current version are current (they validate the same state).
 */
export function etagFor(version: number, format: Format, fields?: Fields): string {
  return entityTag(`v${version}`, format, false, fields);
}

/** A field set (http/fields.ts): a representation with only some fields is another representation. */
interface Fields {
  tag: string;
}

/**
 * An entity tag of any representation: `opaque` names its content, the field set and the format
 * are appended (only some fields, or XML, is another representation: If-None-Match with the tag
 * of one never gets a 304 for another), and `weak` marks a tag that names content equivalent for
 * caching but not the stored record itself (RFC 9110 §8.8.1), so If-Match never accepts it.
 */
export function entityTag(opaque: string, format: Format, weak = false, fields?: Fields): string {
  const selected = fields === undefined ? opaque : `${opaque}.f${fields.tag}`;
  return `${weak ? 'W/' : ''}"${format === 'json' ? selected : `${selected}-xml`}"`;
}

/** The tag of a field set: `.f` and the set's digest of 12 characters, before any `-xml`. */
const FIELDS_PART = /\.f[\w-]{12}(?=(?:-xml)?$)/;

interface EntityTags {
  any: boolean;
  tags: { weak: boolean; opaque: string }[];
}

function parseEntityTags(header: string): EntityTags {
  if (header.trim() === '*') return { any: true, tags: [] };
  const tags: EntityTags['tags'] = [];
  for (const match of header.matchAll(/(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"/g)) {
    tags.push({ weak: match[1] !== undefined, opaque: match[2]! });
  }
  return { any: false, tags };
}

/** If-None-Match on GET/HEAD: true when the client's copy is current (answer 304). Weak comparison, so `etag` may be weak too. */
export function ifNoneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const { any, tags } = parseEntityTags(header);
  const opaque = parseEntityTags(etag).tags[0]?.opaque;
  return any || tags.some((tag) => tag.opaque === opaque);
}

/**
 * If-Match on a write: true when the write may proceed. Strong comparison (RFC 9110 §13.1.1):
 * a weak tag never matches. No header means no condition. The tag of any representation of the
 * current version (XML, some fields) validates the same state, so it is current too.
 */
export function ifMatchAllows(header: string | undefined, version: number): boolean {
  if (header === undefined) return true;
  const { any, tags } = parseEntityTags(header);
  if (any) return true;
  const current = [etagFor(version, 'json'), etagFor(version, 'xml')].map((tag) => tag.slice(1, -1));
  return tags.some((tag) => !tag.weak && current.includes(tag.opaque.replace(FIELDS_PART, '')));
}
