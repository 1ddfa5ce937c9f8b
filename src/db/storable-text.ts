/**
 * Text that came from outside (a URL's path, a token's claim, a key of an uploaded row, an error
 * a receiver caused) as both databases store it alike. PostgreSQL's text cannot hold U+0000: a
 * statement with one fails whole ("invalid byte sequence for encoding UTF8: 0x00"), where SQLite
 * would store it. A lone surrogate (not Unicode) would be stored by both as U+FFFD, silently. So
 * a NUL is written as U+2400 (SYMBOL FOR NULL, "␀": what was sent stays visible) and a lone
 * surrogate as U+FFFD, on both databases. Bodies and query strings never get this far (they are
 * refused with 400, http/text.ts); this is for what is recorded about a request, not refused.
 */
const SHOWN_NUL = '\u2400';

/** ES2024's String.prototype.isWellFormed and toWellFormed, which Node 20 has (not in the ES2022 library types). */
type WellFormed = string & { isWellFormed(): boolean; toWellFormed(): string };

export function storableText(text: string): string {
  const wellFormed = (text as WellFormed).isWellFormed() ? text : (text as WellFormed).toWellFormed();
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', SHOWN_NUL) : wellFormed;
}

/** storableText of a value that may be absent. */
export function storableOrNull(text: string | null | undefined): string | null {
  return text === null || text === undefined ? null : storableText(text);
}
