import { PassThrough, type Readable, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { AppError, BadRequestError } from '../errors.js';

/**
 * Request bodies sent with a `Content-Encoding` (RFC 9110 §8.4): gzip (what clients send for large
 * files), deflate (zlib's format, as HTTP names it) and br are decoded as they arrive, and every
 * limit counts the decoded bytes (a body's ROWI_BODY_LIMIT, an import's ROWI_IMPORT_MAX_BYTES), so
 * a small body that inflates to gigabytes is refused when it passes the limit, having cost no more
 * than that. Any other coding is refused with 415 and `Accept-Encoding` naming those taken
 * (RFC 9110 §12.5.3); a body that is not what its coding says is 400 `malformed-body`. Only routes
 * that take a body and answer 415 look at the header (docs/conventions.md).
 */
export const CONTENT_CODINGS = ['gzip', 'deflate', 'br'] as const;
type ContentCoding = (typeof CONTENT_CODINGS)[number];

const DECODERS: Record<ContentCoding, () => Transform> = {
  gzip: createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** `x-gzip` is gzip (RFC 9110 §8.4.1.3); identity is no coding at all. */
const ALIASES: Record<string, ContentCoding | 'identity' | undefined> = {
  gzip: 'gzip',
  'x-gzip': 'gzip',
  deflate: 'deflate',
  br: 'br',
  identity: 'identity',
};

/** A decoded body: what its bytes were before decoding, counted as Fastify counts a body against Content-Length. */
export type DecodedBody = PassThrough & { receivedEncodedLength: number; encoded: Readable };

export function registerContentDecoding(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const header = request.headers['content-encoding'];
    if (header === undefined || !takesCodedBodies(request.routeOptions.schema)) return done(null, payload);
    const codings = header
      .split(',')
      .map((coding) => ALIASES[coding.trim().toLowerCase()] ?? coding.trim())
      .filter((coding) => coding !== 'identity' && coding !== '');
    if (codings.length === 0) return done(null, payload);
    const [coding] = codings;
    if (codings.length > 1 || !(CONTENT_CODINGS as readonly string[]).includes(coding!))
      return done(unsupportedCoding(header));
    done(null, decodedBody(payload, coding as ContentCoding));
  });
}

/**
 * A route that takes a body and may answer 415: the others (a form of RFC 6749, whose errors have
 * a shape of their own) read what was sent as it is.
 */
function takesCodedBodies(schema: FastifySchema | undefined): boolean {
  return schema?.body !== undefined && (schema.response as Record<string, unknown> | undefined)?.['415'] !== undefined;
}

function decodedBody(payload: Readable, coding: ContentCoding): DecodedBody {
  const decoder = DECODERS[coding]();
  const body = Object.assign(new PassThrough(), { receivedEncodedLength: 0, encoded: payload });
  // Its reader may attach later (an import's handler reads it once its checks are done): the error
  // waits in body.errored meanwhile, rather than ending the process as an unhandled one.
  body.on('error', () => {});
  payload.on('data', (chunk: Buffer) => (body.receivedEncodedLength += chunk.length));
  // The client's own failure (an upload it ended midway) is passed on as it is.
  payload.once('error', (error) => body.destroy(error));
  decoder.once('error', (error: Error) => {
    payload.unpipe(decoder);
    body.destroy(
      new BadRequestError(
        `The body is not ${coding} data, as its Content-Encoding says (${error.message}); nothing of it was used.`,
        undefined,
        'malformed-body',
      ),
    );
  });
  payload.pipe(decoder).pipe(body);
  return body;
}

function unsupportedCoding(header: string): AppError {
  return new AppError(
    'unsupported-media-type',
    `A body with Content-Encoding ${header.slice(0, 100)} is not accepted here; send it as one of ${CONTENT_CODINGS.join(', ')}, or not encoded.`,
    {
      headers: { 'accept-encoding': CONTENT_CODINGS.join(', ') },
      extensions: { accepted_encodings: [...CONTENT_CODINGS] },
    },
  );
}
