import Type, { type TLiteral, type TSchema, type TSchemaOptions, type TUnion } from 'typebox';
import { freeText } from './free-text.js';
import { MEDIA_TYPES } from './negotiate.js';

/**
 * Schema pieces every resource shares, and `operation()`, which turns a route's declaration
 * into the Fastify schema that validates it, serialises it and documents it in OpenAPI.
 */

/** Ids are positive integers that JavaScript and JSON clients can hold exactly. */
export const Id = Type.Integer({
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
  description: 'server-assigned identifier',
});

/**
 * One of `values`, each a literal (`anyOf` of `const`s). Typed as TypeBox types a union of one
 * literal of the values' union, since a union built from an array rather than a tuple is `never`
 * to `Static`, which would leave every field of the type unusable to the compiler.
 */
export function oneOfLiterals<const T extends string>(
  values: readonly T[],
  options?: TSchemaOptions,
): TUnion<[TLiteral<T>]> {
  return Type.Union(
    values.map((value) => Type.Literal(value)),
    options,
  ) as TUnion<[TLiteral<T>]>;
}

export const IdParams = Type.Object({ id: Id });

/**
 * What is built from catalogues a resource may add to before the app is built (scopes, event
 * types): built when first asked for and again only once `key` (the catalogues' state) changes,
 * so the routes of one app share one schema and the OpenAPI document names it once.
 */
export function builtPerCatalogue<T>(key: () => string, build: () => T): () => T {
  let built: { key: string; value: T } | undefined;
  return () => {
    const now = key();
    if (built?.key !== now) built = { key: now, value: build() };
    return built.value;
  };
}

export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339, UTC' });

/** The fields every stored record has; read-only. */
export const RecordFields = {
  id: Type.Integer({ ...Id, readOnly: true }),
  created_at: Type.String({ ...Timestamp, readOnly: true, description: 'when the record was created (RFC 3339, UTC)' }),
  updated_at: Type.String({
    ...Timestamp,
    readOnly: true,
    description: 'when the record last changed (RFC 3339, UTC)',
  }),
};

/**
 * The options of a closed object: unknown fields refused (422), the XML element its
 * representation is named by, and its title in the OpenAPI document.
 */
export const closedObject = (element: string, title: string) =>
  ({ additionalProperties: false, xml: { name: element }, title }) as const;

/** A string field that may also be null. */
export const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

/** A display name: 1–200 characters, at least one of them visible, none refused as free text (free-text.ts). */
export const DisplayName = freeText({
  minLength: 1,
  maxLength: 200,
  visible: true,
  description: 'display name, 1–200 characters',
});

/** What an operation's description says of its conditional headers, in the same words everywhere. */
export const CONDITIONAL_WRITE =
  'With If-Match, only while the stored ETag matches (412 precondition-failed otherwise).';
export const CONDITIONAL_READ = 'With If-None-Match naming the current ETag, 304 without a body.';
export const IfMatchHeaders = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'ETag the change is conditional on (412 when stale)' })),
});
export const IfNoneMatchHeaders = Type.Object({
  'if-none-match': Type.Optional(Type.String({ description: 'ETag of the copy the client holds (304 when current)' })),
});

/**
 * Read-only fields a PUT or PATCH body may echo back, so a client can send what it read; each
 * must equal the stored value (422 read-only-field otherwise). Marked readOnly in the request
 * schema too, which in JSON Schema means the server owns the value.
 */
export const EchoedReadOnly = {
  id: Type.Optional(RecordFields.id),
  created_at: Type.Optional(RecordFields.created_at),
  updated_at: Type.Optional(RecordFields.updated_at),
};

/** RFC 9457 problem details, with rowi's request id and field errors. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ format: 'uri-reference', description: 'problem type; dereference it for documentation' }),
    title: Type.String({ description: 'short summary of the problem type' }),
    status: Type.Integer({ minimum: 100, maximum: 599 }),
    detail: Type.String({ description: 'what went wrong in this occurrence' }),
    instance: Type.String({ format: 'uri-reference', description: 'the path the request addressed' }),
    request_id: Type.String({ description: 'the X-Request-Id of the request; quote it when asking for help' }),
    errors: Type.Optional(
      Type.Array(
        Type.Object(
          {
            in: Type.Union([Type.Literal('body'), Type.Literal('query'), Type.Literal('header'), Type.Literal('path')]),
            pointer: Type.String({ description: 'JSON Pointer (RFC 6901, URI fragment form) to the offending value' }),
            detail: Type.String(),
          },
          { additionalProperties: false },
        ),
      ),
    ),
  },
  {
    $id: 'Problem',
    title: 'Problem',
    additionalProperties: true,
    xml: { name: 'problem', namespace: 'urn:ietf:rfc:7807' },
  },
);

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: 'Malformed body, bad query parameter or header',
  401: 'Missing or invalid credentials',
  403: 'The caller may not do this',
  404: 'No such resource',
  406: 'Accept allows neither JSON nor XML',
  409: 'Conflicts with the stored state',
  412: 'If-Match does not match the current ETag',
  413: 'Body larger than the limit',
  415: 'Body media type not accepted here',
  422: 'Well-formed body that breaks the schema or a rule',
  429: 'The caller spent its rate limit; retry after Retry-After seconds (RateLimit headers say where it stands)',
  500: 'Unexpected fault (logged with the request id)',
  502: 'The upstream weather provider failed and rowi had no earlier value to serve',
  503: 'Shutting down, or the database cannot take the request now; retry after Retry-After seconds',
  507: 'The database has no space left for the write (a full disk); nothing was written; retry after Retry-After seconds',
  504: 'The upstream weather provider timed out and rowi had no earlier value to serve',
};

const problemRef = { $ref: 'Problem#' };

export function problemResponse(status: number) {
  return {
    description: PROBLEM_DESCRIPTIONS[status] ?? 'Problem',
    headers: {
      ...RESPONSE_HEADERS.requestId,
      ...RESPONSE_HEADERS.rateLimit,
      ...(status === 503 || status === 429 || status === 502 || status === 507
        ? { 'Retry-After': { type: 'string', description: 'seconds to wait before retrying' } }
        : {}),
    },
    content: {
      [MEDIA_TYPES.json.problem]: { schema: problemRef },
      [MEDIA_TYPES.xml.problem]: { schema: problemRef },
    },
  };
}

export const header = (description: string, schema: TSchema = Type.String()) => ({ ...schema, description });

export const RESPONSE_HEADERS = {
  requestId: { 'X-Request-Id': header("the request id (the caller's when it sent a sane one)") },
  etag: { ETag: header('strong entity tag of this representation; send it in If-Match / If-None-Match') },
  location: { Location: header('path of the created resource') },
  link: { Link: header('RFC 8288 links; rel="next" when there is a next page') },
  rateLimit: {
    'RateLimit-Policy': header(
      'the rate-limit policies this request was counted against: "name";q=<quota>;w=<window seconds> (IETF httpapi draft); absent on uncounted routes',
    ),
    RateLimit: header(
      'where the caller stands in each policy: "name";r=<remaining>;t=<seconds until the quota is whole>',
    ),
  },
  cache: {
    'Cache-Control': header(
      'how long the weather may be reused: private, max-age=<TTL> for a provider answer (with Age), private, no-cache for recorded or stale weather',
    ),
    Age: header(
      'seconds since rowi received this weather from the provider (RFC 9111 §5.1); 0 for recorded weather',
      Type.Integer({ minimum: 0 }),
    ),
    'Cache-Status': header(
      "RFC 9211: how rowi's cache of the provider answered (hit, fwd=uri-miss|stale, fwd-status, ttl, stored, collapsed, detail on failure); only when the provider was involved",
    ),
  },
  replayed: {
    'Idempotent-Replayed': header('"true" when the response replays an earlier one with the same Idempotency-Key'),
  },
};

/** A success response available as JSON and XML (or only the formats given). */
export function representation(
  schema: TSchema,
  description: string,
  headers: Record<string, unknown> = {},
  formats: readonly ('json' | 'xml')[] = ['json', 'xml'],
) {
  return {
    description,
    headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit, ...headers },
    content: Object.fromEntries(formats.map((format) => [MEDIA_TYPES[format].data, { schema }])),
  };
}

/** A response without a body (204, 304). */
export function noContent(description: string, headers: Record<string, unknown> = {}) {
  return {
    description,
    type: 'null',
    headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit, ...headers },
  } as const;
}

export const REQUEST_BODY_TYPES = {
  write: ['application/json', 'application/xml'],
  patch: ['application/merge-patch+json', 'application/json', 'application/xml'],
} as const;

/**
 * What a route may declare as its permission: 'public' (no credentials), 'authenticated' (any
 * valid credential, whatever its scopes: an answer about the credential itself), or one of the
 * scopes that the authentication layer adds to this interface (declaration merging, in
 * auth/policy.ts). The engine checks every declaration at compile time without knowing a scope.
 */
export interface RoutePermissions {
  public: true;
  authenticated: true;
}
export type RoutePermission = keyof RoutePermissions & string;

interface OperationSpec {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  params?: TSchema;
  querystring?: TSchema;
  headers?: TSchema;
  body?: TSchema;
  consumes?: readonly string[];
  response: Record<number, unknown>;
  /**
   * The scope the operation needs (`users:read`), authenticated or public. Every route must declare one:
   * the authentication plugin refuses to start with a route that does not (docs/security.md).
   */
  permission: RoutePermission;
  /** Scopes the operation needs besides `permission`, whatever its URL (an import: creating and changing records). */
  alsoPermissions?: readonly RoutePermission[];
  /** Problem statuses beyond those implied by the declaration (a body implies 400, 413, 415, 422…). */
  problems?: number[];
  /** Implied problem statuses the operation answers otherwise (the token endpoint's RFC 6749 errors). */
  omitProblems?: number[];
  /**
   * The standard that fixes the answer's media type as JSON (RFC 6749 for tokens, RFC 7517 for a
   * key set…): such an operation answers JSON whatever Accept asks for, so it never answers 406,
   * and its description says so.
   */
  jsonFixedBy?: string;
  /**
   * The operation answers a stream of Server-Sent Events (text/event-stream), whatever Accept
   * asks for (no 406); its problems are JSON.
   */
  eventStream?: true;
  /** The operation answers this media type whatever Accept asks for (no 406); its problems are JSON. */
  fixedMediaType?: string;
  /**
   * The format answered when Accept is absent or allows every format equally (any type), when it is
   * not JSON (a download whose usual form is NDJSON); Accept still chooses among the others.
   */
  defaultFormat?: 'ndjson';
}

/**
 * A route's schema. The problems every client can meet on it are derived from what it takes,
 * so the OpenAPI document lists them without anyone having to remember: always 400 (a URL or a
 * query string refused before any route), 406 (unless a standard fixes the format), 413 (any
 * request may carry a body), 429 (rate limits), 500 and 503 (a shutdown, load shedding, a
 * database that cannot answer, a handler past its time); 404 with an id in the path; 400,
 * 413, 415 and 422 with a body; 507 on writes (route-completion.ts).
 */
export function operation<const S extends OperationSpec>(spec: S) {
  // 400 on any route: a URL that is not validly percent-encoded, credentials in the query string,
  // a NUL in a query parameter are refused before the route is reached.
  const statuses = new Set([
    400,
    ...(spec.jsonFixedBy === undefined && spec.eventStream === undefined && spec.fixedMediaType === undefined
      ? [406]
      : []),
    413,
    429,
    500,
    503,
    ...(spec.problems ?? []),
  ]);
  // Credentials are checked on every non-public route: malformed (400), missing or invalid (401);
  // and a scope on every route that needs one (403).
  if (spec.permission !== 'public') for (const status of [400, 401]) statuses.add(status);
  if (spec.permission !== 'public' && spec.permission !== 'authenticated') statuses.add(403);
  if (spec.params) statuses.add(404);
  if (spec.querystring || spec.headers) statuses.add(400);
  if (spec.body) for (const status of [400, 413, 415, 422]) statuses.add(status);
  for (const status of spec.omitProblems ?? []) statuses.delete(status);
  const problems = Object.fromEntries([...statuses].sort().map((status) => [status, problemResponse(status)]));
  const {
    problems: _problems,
    omitProblems: _omitProblems,
    jsonFixedBy,
    eventStream,
    fixedMediaType,
    defaultFormat,
    permission,
    alsoPermissions,
    response,
    ...rest
  } = spec;
  return {
    ...rest,
    ...(eventStream === undefined ? {} : { 'x-event-stream': true }),
    ...(fixedMediaType === undefined ? {} : { 'x-fixed-media-type': fixedMediaType }),
    ...(defaultFormat === undefined ? {} : { 'x-default-format': defaultFormat }),
    ...(jsonFixedBy === undefined
      ? {}
      : {
          description: `${spec.description ? `${spec.description} ` : ''}The answer is JSON whatever Accept asks for: ${jsonFixedBy} fixes its media type (no 406).`,
          'x-json-fixed-by': jsonFixedBy,
        }),
    // The authentication layer reads it, checks the route's callers against it, and adds the
    // operation's security requirement to the document.
    'x-permission': permission,
    ...(alsoPermissions === undefined ? {} : { 'x-also-scopes': alsoPermissions }),
    ...(spec.body ? { consumes: spec.consumes ?? REQUEST_BODY_TYPES.write } : {}),
    // A route's own description of a status wins over the generic problem (the token endpoint's RFC 6749 errors).
    response: { ...problems, ...response },
  } as Omit<
    S,
    | 'problems'
    | 'omitProblems'
    | 'permission'
    | 'alsoPermissions'
    | 'jsonFixedBy'
    | 'eventStream'
    | 'fixedMediaType'
    | 'defaultFormat'
  > & {
    response: S['response'];
    'x-permission': RoutePermission;
  };
}

/**
 * If-Match's own grammar (RFC 9110 §13.1.1), for an `if_match` member standing for the header (a
 * batch entry): `*` or entity-tags of visible characters, so no control or invisible character
 * reaches the comparison.
 */
export const IF_MATCH_PATTERN = '^(\\*|(W/)?"[\\x21\\x23-\\x7E]*"( *, *(W/)?"[\\x21\\x23-\\x7E]*")*)$';
