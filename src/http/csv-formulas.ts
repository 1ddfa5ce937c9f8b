/**
 * Text a spreadsheet would run as a formula, with a single quote in front (OWASP's CSV injection
 * advice; docs/reading.md "CSV"): every text cell of every CSV rowi writes passes through here
 * (http/export-shapes.ts). That is text that begins with a tab, CR or LF, or whose first character
 * after any spaces is `=`, `+`, `-` or `@`: spreadsheets trim before they look, and not only ASCII
 * spaces (the no-break and ideographic spaces, the other Unicode spaces, a BOM), and some take the
 * full-width (＝ ＋ － ＠), small (﹦ ﹢ ﹣ ﹫) and minus-sign (−) forms for the signs. csv-stringify's
 * own guard looks at the first character only.
 */
export function guardFormula(text: string): string {
  const first = text.charCodeAt(0);
  // Most text starts with a letter or a digit: decided by one comparison.
  if ((first >= 0x41 && first <= 0x7e) || (first >= 0x30 && first <= 0x39) || text.length === 0) return text;
  if (first === 0x09 || first === 0x0a || first === 0x0d) return `'${text}`;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (FORMULA_SIGNS.has(code)) return `'${text}`;
    if (!BLANKS.has(code)) return text;
  }
  return text;
}

/** = + - @ and the forms spreadsheets take for them: full-width, small, the minus sign. */
const FORMULA_SIGNS = new Set([
  0x3d, 0x2b, 0x2d, 0x40, 0xff1d, 0xff0b, 0xff0d, 0xff20, 0xfe66, 0xfe62, 0xfe63, 0xfe6b, 0x2212,
]);

/** What a spreadsheet trims before it looks for a formula: ASCII and Unicode spaces, line ends, a BOM. */
const BLANKS = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
  0x2007, 0x2008, 0x2009, 0x200a, 0x200b, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff,
]);
