import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import secureJson from 'secure-json-parse';
import { BadRequestError, NotAcceptableError, UnsupportedMediaTypeError } from '../errors.js';
import {
  addVary,
  ALL_FORMATS,
  BOTH_FORMATS,
  EXPORT_FORMATS,
  MEDIA_TYPES,
  charsetOf,
  chooseFormat,
  mediaTypeOf,
  type Format,
} from './negotiate.js';
import { assertStorableText, decodeUtf8 } from './text.js';
import { compileXmlSerializer, parseXmlBody, type XmlSchema } from './xml.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The representation negotiated for the response (and for a problem, should one occur). */
    format: Format;
  }
  interface FastifyContextConfig {
    /** Formats the route's success responses come in; derived from its response schemas. */
    formats?: readonly Format[];
    /** JSON whatever Accept says: a standard fixes the media type (operation()'s jsonFixedBy). */
    jsonFixed?: boolean;
    /** XML writers of the route's success responses, by status. */
    xmlSerializers?: Record<string, (value: unknown) => string>;
  }
}

/**
 * What a JSON body may hold, checked in one pass over the text before it is parsed (docs/guide.md
 * "Conventions"): rowi's documents are a few levels deep and hold a few hundred values (an order
 * of 100 lines, about 300). Parsing a megabyte of 100,000 members takes V8 about 100 ms, stalling
 * every request of the process; the scan refuses it in a few.
 */
export const JSON_LIMITS = { depth: 32, values: 10_000 } as const;

/**
 * Representations, in both directions: the response format negotiated from Accept (406 when
 * none fits), and request bodies parsed from JSON or XML by Content-Type (415 for anything
 * else, or for a media type the route does not take).
 */
export function registerRepresentations(app: FastifyInstance): void {
  app.decorateRequest('format', 'json');
  app.addHook('onRoute', describeRepresentations);

  app.addHook('onRequest', (request, reply, done) => {
    const { formats = BOTH_FORMATS, jsonFixed } = request.routeOptions.config;
    if (jsonFixed === true) {
      done();
      return;
    }
    addVary(reply, 'Accept');
    const format = chooseFormat(request.headers.accept, formats);
    if (format === undefined) {
      done(
        new NotAcceptableError(
          request.headers.accept ?? '',
          formats.map((available) => MEDIA_TYPES[available].data),
        ),
      );
      return;
    }
    request.format = format;
    if (format === 'xml') {
      const serializers = request.routeOptions.config.xmlSerializers ?? {};
      reply.type(`${MEDIA_TYPES.xml.data}; charset=utf-8`);
      reply.serializer((payload) => (serializers[reply.statusCode] ?? genericXml)(payload));
    }
    done();
  });

  // Bodies are read as bytes and decoded strictly (decodeUtf8), never with silent replacement;
  // what they parse to is checked for text rowi refuses (assertStorableText) before validation.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    ['application/json', 'application/merge-patch+json'],
    { parseAs: 'buffer' },
    (request, body, done) => {
      try {
        done(null, parseJsonBody(request, body as Buffer));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
  app.addContentTypeParser(['application/xml', 'text/xml'], { parseAs: 'buffer' }, (request, body, done) => {
    try {
      checkMediaType(request);
      const text = decodeUtf8(body as Buffer);
      if (text.trim() === '') {
        done(null, emptyBody(request));
        return;
      }
      const parsed = parseXmlBody(text, request.routeOptions.schema?.body as XmlSchema | undefined);
      assertStorableText(parsed);
      done(null, parsed);
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

const genericXml = compileXmlSerializer({}, 'response');

function describeRepresentations(route: RouteOptions): void {
  const responses = (route.schema?.response ?? {}) as Record<
    string,
    { content?: Record<string, { schema: XmlSchema }> }
  >;
  const formats = new Set<Format>();
  const xmlSerializers: Record<string, (value: unknown) => string> = {};
  for (const [status, response] of Object.entries(responses)) {
    if (!response.content || Number(status) >= 400) continue;
    if (response.content[MEDIA_TYPES.json.data]) formats.add('json');
    for (const format of EXPORT_FORMATS) if (response.content[MEDIA_TYPES[format].data]) formats.add(format);
    const xml = response.content[MEDIA_TYPES.xml.data];
    if (xml) {
      formats.add('xml');
      xmlSerializers[status] = compileXmlSerializer(xml.schema);
    }
  }
  const marks = route.schema as
    | {
        'x-json-fixed-by'?: string;
        'x-event-stream'?: true;
        'x-fixed-media-type'?: string;
        'x-default-format'?: Format;
      }
    | undefined;
  // An event stream is negotiated by nobody: its problems are JSON, like those of a fixed format.
  const jsonFixed =
    marks?.['x-json-fixed-by'] !== undefined ||
    marks?.['x-event-stream'] === true ||
    marks?.['x-fixed-media-type'] !== undefined;
  route.config = {
    ...route.config,
    formats: jsonFixed ? ['json'] : formats.size === 0 ? BOTH_FORMATS : inOrder(formats, marks?.['x-default-format']),
    jsonFixed,
    xmlSerializers,
  };
}

/** The route's formats in the server's order of preference; its default format, if it names one, first. */
function inOrder(formats: ReadonlySet<Format>, first: Format | undefined): Format[] {
  const ordered = ALL_FORMATS.filter((format) => formats.has(format));
  return first === undefined || !formats.has(first)
    ? ordered
    : [first, ...ordered.filter((format) => format !== first)];
}

function parseJsonBody(request: FastifyRequest, body: Buffer): unknown {
  checkMediaType(request);
  const text = decodeUtf8(body);
  if (text.trim() === '') return emptyBody(request);
  scanJson(text);
  let parsed: unknown;
  try {
    // secure-json-parse refuses __proto__ and constructor.prototype keys (prototype poisoning).
    parsed = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    throw new BadRequestError(`The body is not valid JSON: ${(error as Error).message}.`, undefined, 'malformed-body');
  }
  assertStorableText(parsed);
  return parsed;
}

/** A body with no content is no body for routes that take none, and malformed for the rest. */
function emptyBody(request: FastifyRequest): undefined {
  if (request.routeOptions.schema?.body === undefined) return undefined;
  throw new BadRequestError(
    `The body is empty but Content-Type says it is ${mediaTypeOf(request.headers['content-type'])}.`,
    undefined,
    'malformed-body',
  );
}

/** A route takes only the media types its schema lists in `consumes`, and only as UTF-8. */
function checkMediaType(request: FastifyRequest): void {
  const consumes = request.routeOptions.schema?.consumes as readonly string[] | undefined;
  const contentType = request.headers['content-type'] ?? '';
  const charset = charsetOf(contentType);
  const mediaTypeTaken = consumes === undefined || consumes.includes(mediaTypeOf(contentType));
  if (!mediaTypeTaken || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new UnsupportedMediaTypeError(contentType, consumes ? [...consumes] : []);
  }
}

/**
 * Counts bracket nesting and values (a separator , or : outside strings starts one) in one pass,
 * without recursion or allocation; refuses a body past JSON_LIMITS before it is parsed.
 */
export function scanJson(text: string): void {
  let depth = 0;
  let values = 1;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index);
    if (inString) {
      if (char === 92 /* \ */) index++;
      else if (char === 34 /* " */) inString = false;
    } else if (char === 34) inString = true;
    else if (char === 123 /* { */ || char === 91 /* [ */) {
      if (++depth > JSON_LIMITS.depth)
        throw new BadRequestError(
          `The JSON body is nested deeper than ${JSON_LIMITS.depth} levels.`,
          undefined,
          'body-too-deep',
        );
    } else if (char === 125 /* } */ || char === 93 /* ] */) depth--;
    else if (char === 44 /* , */ || char === 58 /* : */) {
      if (++values > JSON_LIMITS.values) {
        throw new BadRequestError(
          `The JSON body holds more than ${JSON_LIMITS.values} values (members and items); rowi's documents need far fewer.`,
          undefined,
          'body-too-complex',
        );
      }
    }
  }
}
