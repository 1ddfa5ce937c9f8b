import { describe, expect, it } from 'vitest';
import { FREE_TEXT_PATTERN, VISIBLE_TEXT_PATTERN } from '../../src/http/free-text.js';
import { REFUSED_CHARACTERS } from '../helpers/text-cases.js';

/** The rule for free text, on its own: what a name or a description may hold (src/http/free-text.ts). */
const visible = new RegExp(VISIBLE_TEXT_PATTERN, 'u');
const free = new RegExp(FREE_TEXT_PATTERN, 'u');

/** Texts a name may be: every script, accents, emoji with their joiners and selectors. */
const ACCEPTED_NAMES: [string, string][] = [
  ['ASCII', 'Ada Lovelace'],
  ['leading and trailing spaces', ' Ada '],
  ['accents and CJK', 'Ünïcödé 名前'],
  ['a no-break space inside', 'Ada\u00a0Lovelace'],
  ['a typographic apostrophe', 'O\u2019Brien'],
  ['Persian with a zero-width non-joiner', 'می\u200cخواهم'],
  ['an emoji sequence with zero-width joiners', '👨\u200d👩\u200d👧'],
  ['an emoji with a variation selector', '\u2764\ufe0f'],
  ['a CJK ideographic variation sequence', '葛\u{E0100}'],
  ['Hebrew, right to left by itself', 'שלום'],
  ['a combining mark on a letter', 'e\u0301'],
];

describe('free text', () => {
  it.each(REFUSED_CHARACTERS)('refuses %s anywhere in a name or a description', (_name, character) => {
    for (const text of [character, `Ada${character}`, `${character}Ada`, `A${character}da`]) {
      expect(visible.test(text), JSON.stringify(text)).toBe(false);
      expect(free.test(text), JSON.stringify(text)).toBe(false);
    }
  });

  it.each(ACCEPTED_NAMES)('takes a name of %s', (_name, text) => {
    expect(visible.test(text)).toBe(true);
    expect(free.test(text)).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['spaces only', '   '],
    ['no-break and ideographic spaces only', '\u00a0\u3000'],
    ['a zero-width joiner only', '\u200d'],
    ['joiners and variation selectors only', '\u200c\u200d\ufe0f'],
  ])('refuses a name that shows nothing: %s', (_name, text) => {
    expect(visible.test(text)).toBe(false);
  });

  it('is a regular expression with and without the u flag, as linters of the OpenAPI document read it', () => {
    for (const pattern of [VISIBLE_TEXT_PATTERN, FREE_TEXT_PATTERN]) {
      expect(() => new RegExp(pattern)).not.toThrow();
      expect(new RegExp(pattern).test('Ada\u202eLovelace')).toBe(false);
    }
  });

  it('takes an empty description, and spaces', () => {
    expect(free.test('')).toBe(true);
    expect(free.test('  ')).toBe(true);
  });
});
