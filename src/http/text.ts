import type { FastifyInstance } from 'fastify';
import { BadRequestError, type FieldError } from '../errors.js';

/**
 * Text rowi refuses wherever it arrives, in a body or a query string, before anything reads it:
 * NUL, which PostgreSQL's text cannot hold (SQLite would store it, and clients would trip on it),
 * and lone surrogates, which are not Unicode (I-JSON, RFC 7493 §2.1): both databases would store
 * U+FFFD instead, silently. Bodies must also be UTF-8 (RFC 8259 §8.1), and are decoded strictly:
 * a byte sequence that is not UTF-8 is refused, not replaced.
 */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The body as text; 400 malformed-body when it is not UTF-8. A byte order mark at the start is
 * skipped (RFC 8259 §8.1 lets a parser ignore it; XML 1.0 §4.3.3 allows it).
 */
export function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    const at = invalidUtf8Offset(body);
    throw new BadRequestError(
      `The body is not valid UTF-8: the bytes at offset ${at} are not a UTF-8 character; send the body in UTF-8.`,
      [{ in: 'body', pointer: '#', detail: `is not UTF-8 at byte ${at}` }],
      'malformed-body',
    );
  }
}

/** Where the first byte sequence that is not UTF-8 starts (RFC 3629 §4), for the problem's detail. */
function invalidUtf8Offset(bytes: Buffer): number {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index]!;
    const length =
      lead < 0x80
        ? 1
        : lead >= 0xc2 && lead <= 0xdf
          ? 2
          : lead >= 0xe0 && lead <= 0xef
            ? 3
            : lead >= 0xf0 && lead <= 0xf4
              ? 4
              : 0;
    if (length === 0 || index + length > bytes.length) return index;
    for (let next = 1; next < length; next++) if ((bytes[index + next]! & 0xc0) !== 0x80) return index;
    const second = bytes[index + 1]!;
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if (
      (lead === 0xe0 && second < 0xa0) ||
      (lead === 0xed && second > 0x9f) ||
      (lead === 0xf0 && second < 0x90) ||
      (lead === 0xf4 && second > 0x8f)
    )
      return index;
    index += length;
  }
  return index;
}

/** The first text in a parsed body (a key or a value) that rowi refuses, with where it is. */
export function findRefusedText(value: unknown): FieldError | undefined {
  const path: string[] = [];
  const found = refusedIn(value, path);
  if (found === undefined) return undefined;
  const pointer = `#${path.map((segment) => `/${segment.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')}`;
  return { in: 'body', pointer, detail: found };
}

/**
 * Walks the value; on the first refused text returns why, with `path` holding where (filled in
 * on the way back, so a clean body, the common case, builds no path at all).
 */
function refusedIn(value: unknown, path: string[]): string | undefined {
  if (typeof value === 'string') return refusedString(value);
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const found = refusedIn(value[index], path);
      if (found !== undefined) {
        path.unshift(String(index));
        return found;
      }
    }
    return undefined;
  }
  for (const key in value) {
    const inName = refusedString(key);
    const found =
      inName === undefined ? refusedIn((value as Record<string, unknown>)[key], path) : `its name ${inName}`;
    if (found !== undefined) {
      path.unshift(key);
      return found;
    }
  }
  return undefined;
}

/** ES2024's String.prototype.isWellFormed, which Node 20 has; the ES2024 library types would also admit what Node 20 lacks. */
type WellFormedCheck = string & { isWellFormed(): boolean };

function refusedString(text: string): string | undefined {
  if (text.includes('\u0000')) return 'contains a NUL character (U+0000), which rowi refuses in any text';
  if (!(text as WellFormedCheck).isWellFormed())
    return 'contains a lone surrogate (a \\uD800–\\uDFFF escape without its pair), which is not Unicode';
  return undefined;
}

/** 400 malformed-body when a parsed body holds refused text. */
export function assertStorableText(body: unknown): void {
  const found = findRefusedText(body);
  if (found)
    throw new BadRequestError(`The body is refused: ${found.pointer} ${found.detail}.`, [found], 'malformed-body');
}

/** Query strings: NUL (%00) in any parameter is refused with 400 before the request goes further. */
export function registerQueryTextCheck(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const query = request.url.indexOf('?');
    // Only a %00 can put a NUL in a parsed query string: most requests cost one search.
    if (query === -1 || !/%00/.test(request.url.slice(query))) return done();
    const parameters = request.query as Record<string, unknown>;
    const name = Object.keys(parameters).find(
      (key) => key.includes('\u0000') || [parameters[key]].flat().some((value) => String(value).includes('\u0000')),
    );
    // The NUL itself is left out of the name as the problem repeats it.
    const shown = (name ?? '').split('\u0000').join('');
    const detail = 'contains a NUL character (%00), which rowi refuses in any text';
    done(
      new BadRequestError(
        `Query parameter ${shown || '(a name)'} ${detail}.`,
        [{ in: 'query', pointer: `#/${shown}`, detail }],
        'invalid-query',
      ),
    );
  });
}
