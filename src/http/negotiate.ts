import type { FastifyReply } from 'fastify';
/**
 * Content negotiation (RFC 9110 §12.5.1): which representation a response takes, chosen from
 * the request's Accept header with q-values. rowi speaks JSON and XML; the problem media types
 * (RFC 9457) belong to the same two families. A collection's list also answers as an export, in
 * CSV (RFC 4180) or NDJSON (docs/reading.md); a problem of such a request is JSON, as no problem
 * type of those media types exists.
 */
export type Format = 'json' | 'xml' | 'csv' | 'ndjson';

/** The formats of an export: the whole filtered collection, streamed (http/export.ts). */
export type ExportFormat = 'csv' | 'ndjson';

export const MEDIA_TYPES: Record<Format, { data: string; problem: string; accepted: readonly string[] }> = {
  json: { data: 'application/json', problem: 'application/problem+json', accepted: ['application/json'] },
  xml: { data: 'application/xml', problem: 'application/problem+xml', accepted: ['application/xml', 'text/xml'] },
  csv: { data: 'text/csv', problem: 'application/problem+json', accepted: ['text/csv'] },
  ndjson: {
    data: 'application/x-ndjson',
    problem: 'application/problem+json',
    accepted: ['application/x-ndjson', 'application/jsonl'],
  },
};

export const BOTH_FORMATS: readonly Format[] = ['json', 'xml'];
/** Every format in the server's order of preference: JSON first, the exports last. */
export const ALL_FORMATS: readonly Format[] = ['json', 'xml', 'csv', 'ndjson'];
export const EXPORT_FORMATS: readonly ExportFormat[] = ['csv', 'ndjson'];

export const isExportFormat = (format: Format): format is ExportFormat => format === 'csv' || format === 'ndjson';

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
  /** 0 for * /*, 1 for type/*, 2 for type/subtype (plus 1 per parameter). */
  specificity: number;
  position: number;
}

/**
 * Picks the format for a response, or undefined when Accept allows none of `available` (406).
 * Among formats of equal quality, the more specific range wins, then the one the client listed
 * first, then the server's order (JSON first).
 */
export function chooseFormat(accept: string | undefined, available: readonly Format[]): Format | undefined {
  if (accept === undefined || accept === '' || accept === '*/*') return available[0];
  const cacheKey = available === BOTH_FORMATS ? accept : `${available.join()}|${accept}`;
  const cached = decisions.get(cacheKey);
  if (cached !== undefined) return cached === NONE ? undefined : cached;
  const decision = decide(parseAccept(accept), available);
  if (decisions.size >= 1000) decisions.clear();
  decisions.set(cacheKey, decision ?? NONE);
  return decision;
}

// Clients send few distinct Accept headers; remembering the decision keeps parsing off the hot path.
const NONE = 'none';
const decisions = new Map<string, Format | typeof NONE>();

function decide(ranges: MediaRange[], available: readonly Format[]): Format | undefined {
  // A header with no parseable range says nothing; treat it as absent rather than refuse.
  if (ranges.length === 0) return available[0];
  let best: { format: Format; q: number; specificity: number; position: number } | undefined;
  available.forEach((format, serverOrder) => {
    const candidates: [string, boolean][] = [
      ...MEDIA_TYPES[format].accepted.map((mediaType): [string, boolean] => [mediaType, false]),
      // A problem type counts only when named outright: "*/*" or "application/*" must not make
      // application/problem+json outrank an application/json the client refused with q=0. An
      // export's problems are JSON's, so they speak for JSON only.
      ...(isExportFormat(format) ? [] : [[MEDIA_TYPES[format].problem, true] as [string, boolean]]),
    ];
    for (const [mediaType, exactOnly] of candidates) {
      const match = bestMatch(ranges, mediaType);
      if (!match || match.q === 0 || (exactOnly && match.subtype === '*')) continue;
      const candidate = {
        format,
        q: match.q,
        specificity: match.specificity,
        position: match.position * 10 + serverOrder,
      };
      if (
        !best ||
        candidate.q > best.q ||
        (candidate.q === best.q && candidate.specificity > best.specificity) ||
        (candidate.q === best.q && candidate.specificity === best.specificity && candidate.position < best.position)
      ) {
        best = candidate;
      }
    }
  });
  return best?.format;
}

/** The most specific range that matches a media type decides its quality (RFC 9110 §12.5.1). */
function bestMatch(ranges: MediaRange[], mediaType: string): MediaRange | undefined {
  const [type, subtype] = mediaType.split('/') as [string, string];
  let best: MediaRange | undefined;
  for (const range of ranges) {
    const matches =
      (range.type === '*' && range.subtype === '*') ||
      (range.type === type && (range.subtype === '*' || range.subtype === subtype));
    if (matches && (!best || range.specificity > best.specificity)) best = range;
  }
  return best;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function parseAccept(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  accept.split(',').forEach((part, position) => {
    const [range = '', ...parameters] = part.split(';').map((piece) => piece.trim());
    const [type, subtype, extra] = range.toLowerCase().split('/');
    if (!type || !subtype || extra !== undefined || !TOKEN.test(type) || !TOKEN.test(subtype)) return;
    if (type === '*' && subtype !== '*') return;
    let q = 1;
    let specificity = type === '*' ? 0 : subtype === '*' ? 1 : 2;
    for (const parameter of parameters) {
      const [name, value = ''] = parameter.split('=').map((piece) => piece.trim());
      if (name?.toLowerCase() === 'q') {
        // RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
        if (!/^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(value)) return;
        q = Number(value);
        break;
      }
      specificity++;
    }
    ranges.push({ type, subtype, q, specificity, position });
  });
  return ranges;
}

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaTypeOf(contentType: string | undefined): string {
  if (!contentType) return '';
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

/** The charset parameter of a Content-Type header, lower-cased, if any. */
export function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '');
  return match?.[1]?.toLowerCase();
}

/** Adds a field to Vary, keeping those already there (CORS adds Origin; representations add Accept). */
export function addVary(reply: FastifyReply, field: string): void {
  const current = reply.getHeader('vary');
  if (current === undefined || current === '') {
    reply.header('vary', field);
    return;
  }
  const fields = String(current)
    .split(',')
    .map((name) => name.trim().toLowerCase());
  if (!fields.includes(field.toLowerCase()) && !fields.includes('*'))
    reply.header('vary', `${String(current)}, ${field}`);
}
