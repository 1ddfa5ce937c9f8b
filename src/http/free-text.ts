import Type from 'typebox';

/**
 * Free text a caller stores (a name, a description): what rowi refuses in it, as one rule that the
 * OpenAPI document states as a pattern, so clients, the docs and fuzzers read the rule that is
 * checked. Refused, anywhere in the text:
 * - control characters (C0, DEL and C1): they cannot travel in XML and rewrite terminals;
 * - the line and paragraph separators U+2028 and U+2029, which break lines where a viewer of one
 *   line does not expect it;
 * - the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which make
 *   a text display in another order than it is stored ("Trojan Source", CVE-2021-42574);
 * - the other invisible characters of Unicode's Default_Ignorable_Code_Point in the Basic
 *   Multilingual Plane (zero-width space, word joiner, byte order mark, soft hyphen, Hangul
 *   fillers…), with which two names that look the same are different and a name can look empty;
 * - the noncharacters U+FDD0–U+FDEF, U+FFFE and U+FFFF, which XML cannot carry.
 * Allowed although invisible, because they shape the visible characters around them: the joiners
 * ZWNJ and ZWJ (Persian, Indic scripts, emoji sequences) and the variation selectors (emoji
 * presentation). A name must also hold at least one visible character: one that is none of these
 * and not a space.
 *
 * Only characters of the Basic Multilingual Plane are named: the pattern must also be a regular
 * expression without ECMAScript's u flag (Spectral checks the document so), where a range of
 * characters beyond U+FFFF cannot be written. The invisible characters beyond it (tag characters,
 * musical and shorthand format controls) are not refused.
 */
/** The refused characters, as the inside of a regular expression's character class. */
export const REFUSED_CHARACTERS =
  '\\u0000-\\u001F\\u007F-\\u009F\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5\\u180E\\u200B\\u200E\\u200F\\u2028-\\u202E\\u2060-\\u206F' +
  '\\u3164\\uFDD0-\\uFDEF\\uFEFF\\uFFA0\\uFFF0-\\uFFFB\\uFFFE\\uFFFF';
/** Spaces, and the invisible characters that are allowed: none of them makes a text visible. */
/** Spaces of every kind, as the inside of a character class (a URL holds none). */
export const SPACE_CHARACTERS = '\\u0020\\u00A0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000';
const BLANK = SPACE_CHARACTERS + '\\u200C\\u200D\\u180B-\\u180D\\u180F\\uFE00-\\uFE0F';

/** Free text that may be empty: no refused character. */
export const FREE_TEXT_PATTERN = `^[^${REFUSED_CHARACTERS}]*$`;
/** Free text with at least one visible character (a name): blanks, one visible character, then anything allowed. */
export const VISIBLE_TEXT_PATTERN = `^[${BLANK}]*[^${REFUSED_CHARACTERS}${BLANK}][^${REFUSED_CHARACTERS}]*$`;

const RULE =
  'no control, invisible (zero-width, byte order mark) or bidirectional-control characters, nor line or paragraph separators';

/**
 * A free-text field: 422 naming the field when it holds a refused character, or (with `visible`)
 * none that shows.
 */
export function freeText(options: { minLength?: number; maxLength: number; visible: boolean; description: string }) {
  return Type.String({
    ...(options.minLength === undefined ? {} : { minLength: options.minLength }),
    maxLength: options.maxLength,
    pattern: options.visible ? VISIBLE_TEXT_PATTERN : FREE_TEXT_PATTERN,
    'x-error': options.visible ? `must contain a visible character, and ${RULE}` : `must contain ${RULE}`,
    description: options.description,
  });
}
