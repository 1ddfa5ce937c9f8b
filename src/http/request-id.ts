import { randomFillSync, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';

/** A caller's X-Request-Id is kept when sane: 1–128 characters of a conservative set. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._~:@/+=-]{1,128}$/;

/** Fastify's genReqId: the caller's id when sane (so traces join up), else a new UUID. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * W3C Trace Context: `traceparent` is `version-traceid-parentid-flags` in lower-case hex. A
 * version other than 00 may add fields after the flags (kept forward compatible, as the
 * specification asks); ff, an all-zero trace id or parent id make the header invalid.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_PARENT = '0'.repeat(16);

/** The trace a request belongs to, and rowi's own span in it. */
export interface TraceContext {
  traceId: string;
  /** rowi's span: the parent id of whatever rowi calls next, and the id it answers with. */
  spanId: string;
  flags: string;
}

/**
 * Ids rowi makes are random, as W3C Trace Context asks (§ "Considerations for trace-id field
 * generation"): an id made of a counter would tell any caller the server's request rate and let
 * it guess other requests' ids. The random bytes are drawn from the random source in blocks and
 * handed out a few at a time, so a request costs no call to it (one per 512 span ids).
 */
const randomPool = Buffer.allocUnsafe(4096);
let poolOffset = randomPool.length;

/** `bytes` random bytes as lower-case hex, never all zeros (an invalid id). */
function randomHex(bytes: number): string {
  for (;;) {
    if (poolOffset + bytes > randomPool.length) {
      randomFillSync(randomPool);
      poolOffset = 0;
    }
    const start = poolOffset;
    poolOffset += bytes;
    for (let index = start; index < poolOffset; index++)
      if (randomPool[index] !== 0) return randomPool.toString('hex', start, poolOffset);
  }
}

/** Where a request's trace is kept on it: a symbol property is cheaper than a WeakMap lookup per request. */
const TRACE = Symbol('rowi.trace');
type Traced = IncomingMessage & { [TRACE]?: TraceContext };

/**
 * The trace of a request: the caller's trace id and flags when its `traceparent` is valid, else a
 * new trace (flags 00: not sampled); rowi's span id is always new. Computed once per request.
 */
export function traceOf(request: Traced): TraceContext {
  let trace = request[TRACE];
  if (trace !== undefined) return trace;
  const header = request.headers.traceparent;
  const match = typeof header === 'string' ? TRACEPARENT.exec(header.trim()) : null;
  const valid =
    match !== null &&
    match[1] !== 'ff' &&
    (match[1] !== '00' || match[5] === undefined) &&
    match[2] !== ZERO_TRACE &&
    match[3] !== ZERO_PARENT;
  const spanId = randomHex(8);
  trace = valid ? { traceId: match[2]!, spanId, flags: match[4]! } : { traceId: randomHex(16), spanId, flags: '00' };
  request[TRACE] = trace;
  return trace;
}

/** The `traceresponse` header: the trace id, with rowi's span as the parent of what follows. */
export function traceResponseOf(request: IncomingMessage): string {
  const trace = traceOf(request);
  return `00-${trace.traceId}-${trace.spanId}-${trace.flags}`;
}

/**
 * Fastify's childLoggerFactory: every log line of a request carries its request id (`reqId`) and
 * its trace id (`trace_id`), so a caller's trace finds rowi's lines.
 */
export function requestLogger(
  logger: FastifyBaseLogger,
  bindings: Record<string, unknown>,
  options: object,
  raw: IncomingMessage,
): FastifyBaseLogger {
  // Fastify makes `bindings` for this request alone: adding to it saves a copy per request.
  bindings.trace_id = traceOf(raw).traceId;
  return logger.child(bindings, options);
}

/** The headers that tie a response to its request: X-Request-Id and traceresponse. */
export function correlate(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id).header('traceresponse', traceResponseOf(request.raw));
}

/** Every response, errors included, carries the request id and the trace (docs/conventions.md). */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    correlate(request, reply);
    done();
  });
}
