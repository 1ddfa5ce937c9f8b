import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  AppError,
  BadRequestError,
  ConflictError,
  MethodNotAllowedError,
  NotFoundError,
  UnsupportedMediaTypeError,
} from '../errors.js';
import type { ProblemType } from '../problem-types.js';
import { isCorruption, isDiskFull, isForeignKeyViolation, isUnavailable } from '../db/driver-errors.js';
import type { DatabaseOutage } from '../db/outage.js';
import { addVary, BOTH_FORMATS, chooseFormat, MEDIA_TYPES } from './negotiate.js';
import type { RouteTable } from './not-allowed.js';
import { ProblemSchema } from './schemas.js';
import { validationError } from './validation-errors.js';
import { correlate } from './request-id.js';
import { isProbe } from './probes.js';
import { faultOf } from '../observability/logger.js';
import { metrics } from '../observability/metrics.js';
import { compileXmlSerializer } from './xml.js';

/**
 * The only place where anything thrown becomes a response: an RFC 9457 problem in the format
 * the client negotiated. Unknown errors are logged in full and answered as a bare 500; stack
 * traces and SQL never reach a caller.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  request_id: string;
  [extension: string]: unknown;
}

/** Problem types are relative URIs served by rowi itself (GET /problems/{type}). */
export const PROBLEM_TYPE_BASE = '/problems/';

const toXml = compileXmlSerializer(ProblemSchema);

export function problemFor(error: AppError, request: FastifyRequest): Problem {
  return problemOf(error, asUriReference(pathOf(request)), request.id);
}

/**
 * The path as a URI reference (RFC 3986), which `instance` must be (RFC 9457 §3.1.5): a path a
 * client sent may hold characters that a URI cannot (`[`, a space, a byte above 0x7F, a `%` not
 * starting an escape), which are percent-encoded, byte for byte as they arrived.
 */
export function asUriReference(path: string): string {
  const escape = (byte: number) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return path.replace(/%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/gu, (character) => {
    const code = character.codePointAt(0)!;
    // Node reads a request line byte by byte (a character per byte); anything wider came from elsewhere, as UTF-8.
    return code <= 0xff ? escape(code) : [...Buffer.from(character, 'utf8')].map(escape).join('');
  });
}

function problemOf(error: AppError, instance: string, requestId: string): Problem {
  // Extensions come first: RFC 9457's own members (and rowi's) can never be overwritten by one.
  return {
    ...error.extensions,
    type: `${PROBLEM_TYPE_BASE}${error.type}`,
    title: error.title,
    status: error.status,
    detail: error.message,
    instance,
    request_id: requestId,
    ...(error.errors ? { errors: error.errors } : {}),
  };
}

/**
 * A problem written on a raw connection, for errors Node's HTTP parser meets before there is a
 * request (a time-out, headers too large, a request line that is not HTTP), and the connection
 * closed. Without a request there is no path: the instance is the new request id as a URN.
 */
export function writeProblemToSocket(socket: Duplex, error: AppError): void {
  const requestId = randomUUID();
  const body = JSON.stringify(problemOf(error, `urn:uuid:${requestId}`, requestId));
  socket.write(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Type: ${MEDIA_TYPES.json.problem}; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  return reply.send(prepareProblem(request, reply, error));
}

/** The problem types of a refusal by authentication or authorisation, counted by kind in the metrics. */
const AUTH_FAILURES = new Set<string>([
  'malformed-credentials',
  'missing-credentials',
  'invalid-credentials',
  'insufficient-scope',
]);

/**
 * Sets the status and headers of the problem on the reply and returns the body to send, for
 * code that hands the body to someone else to send (a plugin's handler that sends what it returns).
 */
export function prepareProblem(request: FastifyRequest, reply: FastifyReply, error: AppError): Problem {
  if (AUTH_FAILURES.has(error.type)) metrics.authFailures.inc({ kind: error.type });
  const format = request.format ?? 'json';
  for (const [name, value] of Object.entries(error.headers ?? {})) reply.header(name, value);
  // The route's ETag or Location describe a success that did not happen.
  reply.removeHeader('etag');
  reply.removeHeader('location');
  reply
    .code(error.status)
    .type(`${MEDIA_TYPES[format].problem}; charset=utf-8`)
    .serializer(format === 'xml' ? toXml : JSON.stringify);
  return problemFor(error, request);
}

/** Maps Fastify's own errors (body parsing, limits, validation) onto rowi's problem types. */
export function toAppError(error: FastifyError, request: FastifyRequest): AppError | undefined {
  if (error instanceof AppError) return error;
  if (isDiskFull(error)) return diskFull();
  if (isCorruption(error)) return storageCorrupt();
  if (isUnavailable(error)) return databaseUnavailable();
  if (isForeignKeyViolation(error)) {
    return new ConflictError(
      'concurrent-change',
      'A record this request refers to was changed or deleted by another request at the same moment; nothing was changed. Retry the request.',
    );
  }
  if (error.validation)
    return validationError(error.validation as never, error.validationContext ?? 'body', pathOf(request)) as AppError;
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError(
        'body-too-large',
        `The body is larger than the limit of ${request.routeOptions.bodyLimit} bytes.`,
        {
          extensions: { limit_bytes: request.routeOptions.bodyLimit },
        },
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new UnsupportedMediaTypeError(
        request.headers['content-type'] ?? '',
        (request.routeOptions.schema?.consumes as string[] | undefined) ?? [],
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new BadRequestError('The body is empty but Content-Type says it is JSON.', undefined, 'malformed-body');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BadRequestError('The body does not match its Content-Length.', undefined, 'malformed-body');
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    // Fastify's client errors (a bad URL encoding, an aborted body…) carry safe messages.
    return new AppError('bad-request', error.message, { status });
  }
  return undefined;
}

/** A problem of the database's, which the caller may retry after `seconds` (Retry-After). */
function retryLater(type: ProblemType, detail: string, seconds: number): AppError {
  return new AppError(type, detail, { headers: { 'retry-after': String(seconds) } });
}

/** Seconds a caller is asked to wait after a write found no space: freeing space takes someone a while. */
const DISK_FULL_RETRY_AFTER_S = 30;

function diskFull(): AppError {
  return retryLater(
    'insufficient-storage',
    'The database has no space left for this write; nothing was written. Reads go on; retry after Retry-After seconds (a POST retried with the same Idempotency-Key takes effect at most once).',
    DISK_FULL_RETRY_AFTER_S,
  );
}

/** Seconds a caller is asked to wait after damage was found: an operator must restore the database first. */
const CORRUPT_RETRY_AFTER_S = 60;

/** The storage layer logs damage once (db/corruption.ts), with what to do; the caller learns no more than that it is there. */
function storageCorrupt(): AppError {
  return retryLater(
    'storage-corrupt',
    'The database of this instance is damaged; rowi refuses writes to it until an operator restores it (nothing of this request was written). Retry after Retry-After seconds.',
    CORRUPT_RETRY_AFTER_S,
  );
}

/** Seconds a caller is asked to wait after the database could not take its request. */
const DATABASE_RETRY_AFTER_S = 2;

function databaseUnavailable(): AppError {
  return retryLater(
    'service-unavailable',
    'The database could not take this request now (unreachable, restarting or too busy). Retry after Retry-After seconds; a POST retried with the same Idempotency-Key takes effect at most once.',
    DATABASE_RETRY_AFTER_S,
  );
}

/** `outage`: where a request the database could not be reached for is counted and, once an outage, logged. */
export function registerProblemHandlers(app: FastifyInstance, routes: RouteTable, outage: DatabaseOutage): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // The client closed its connection (an upload it gave up halfway): nobody reads an answer, and
    // it is no fault of rowi's. The access log and the audit trail record it (status 499).
    if (request.raw.aborted || request.raw.socket?.destroyed === true) {
      request.log.debug({ err: error }, 'the request failed after its client went away');
      return reply.code(499).send();
    }
    const known = toAppError(error, request);
    if (known) {
      if (known.type === 'insufficient-storage') logDiskFull(request, error);
      // The database unreachable: the outage says so once, not every request it refuses.
      else if (known.type === 'service-unavailable' && outage.refused(error, request.log))
        return sendProblem(request, reply, known);
      else if (known.type === 'storage-corrupt')
        request.log.debug({ err: error }, 'refused: the database is damaged (logged once when found)');
      else if (known.type === 'issuer-unavailable')
        request.log.debug(
          { problem: known.type },
          "refused: the issuer's key server does not answer (logged when that starts)",
        );
      // A probe's 503 is its answer, not a fault: the probe logs what failed itself.
      // A known fault (the database unreachable, a time-out) is one short line naming it: its
      // stack says nothing more, and an outage would repeat it for every request.
      else if (known.status >= 500 && !isProbe(request))
        request.log.error({ problem: known.type }, `request failed: ${faultOf(error)}`);
      return sendProblem(request, reply, known);
    }
    request.log.error({ err: error }, 'unexpected error');
    return sendProblem(
      request,
      reply,
      new AppError(
        'internal-error',
        `Something went wrong on our side. Quote request id ${request.id} when reporting it.`,
      ),
    );
  });

  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request);
    const allowed = routes.allowedMethods(path);
    if (allowed.length === 0) return sendProblem(request, reply, new NotFoundError(`Nothing is found at ${path}.`));
    if (request.method === 'OPTIONS') return reply.code(204).header('allow', allowed.join(', ')).send();
    return sendProblem(request, reply, new MethodNotAllowedError(request.method, path, allowed));
  });
}

/**
 * A full disk refuses every write until someone frees space: the log names the cause once, not
 * once a request. SQLite's driver notices the disk filling and emptying (it logs both, see
 * connect.ts); PostgreSQL's disk_full is logged here, at most once every few minutes.
 */
const DISK_FULL_LOG_INTERVAL_MS = 5 * 60 * 1000;
let diskFullLoggedAt = -Infinity;

function logDiskFull(request: FastifyRequest, error: unknown): void {
  const isPostgres = (error as { code?: unknown }).code === '53100';
  const now = performance.now();
  if (!isPostgres || now - diskFullLoggedAt < DISK_FULL_LOG_INTERVAL_MS) {
    request.log.debug({ err: error }, 'write refused: no space left');
    return;
  }
  diskFullLoggedAt = now;
  request.log.error(
    { err: error },
    'PostgreSQL has no disk space left (disk_full): writes are refused (507) until space is freed; this is logged again in 5 minutes at the earliest',
  );
}

/**
 * Fastify's own refusals before any route or hook (its `frameworkErrors`): a path segment that is
 * not validly percent-encoded (400), and a path parameter longer than any record's name (404:
 * ids have at most 16 digits, places 64 characters). Answered as problems like everything else,
 * in the format Accept asks for, with the request id.
 */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  request.format = chooseFormat(request.headers.accept, BOTH_FORMATS) ?? 'json';
  correlate(request, reply);
  addVary(reply, 'Accept');
  const path = pathOf(request);
  const problem =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new NotFoundError(`Nothing is found at ${path}.`)
      : new BadRequestError(
          `The URL ${path} is not validly percent-encoded (a % must be followed by two hexadecimal digits naming UTF-8 bytes).`,
        );
  sendProblem(request, reply, problem);
}

export function pathOf(request: FastifyRequest): string {
  const query = request.url.indexOf('?');
  return query === -1 ? request.url : request.url.slice(0, query);
}
