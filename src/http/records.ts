import type { FastifyReply, FastifyRequest } from 'fastify';
import { etagFor, ifMatchAllows, ifNoneMatchHits } from './etag.js';
import { answerSelected, type FieldSelection } from './fields.js';
import type { IdempotentResult } from './idempotency.js';

/**
 * Sending one record, with the conditional-request rules of RFC 9110 §13: a strong ETag on every
 * representation, 304 when the client's If-None-Match copy is current, and If-Match turned into
 * the condition a service checks against the stored version before it writes.
 */
export function sendRecord(
  request: FastifyRequest,
  reply: FastifyReply,
  record: { version: number },
  status = 200,
  fields?: FieldSelection,
) {
  return sendTagged(request, reply, record, etagFor(record.version, request.format, fields), status, fields);
}

/**
 * A representation with its entity tag (strong or weak); 304 on GET/HEAD when If-None-Match names
 * it. With `fields`, only those fields of the body (the tag must then be the field set's).
 */
export function sendTagged(
  request: FastifyRequest,
  reply: FastifyReply,
  body: unknown,
  etag: string,
  status = 200,
  fields?: FieldSelection,
) {
  reply.header('etag', etag);
  if (
    (request.method === 'GET' || request.method === 'HEAD') &&
    ifNoneMatchHits(request.headers['if-none-match'], etag)
  ) {
    return reply.code(304).removeHeader('content-type').send();
  }
  if (!fields) return reply.code(status).send(body);
  answerSelected(request, reply);
  return reply.code(status).send(fields.pick(body));
}

/** The check a conditional request (If-Match) makes against the stored version of its target. */
export type VersionCondition = (storedVersion: number) => boolean;

/**
 * If-Match on a request that creates its target when there is none (PUT or PATCH of a place):
 * `allows` is checked against the stored version as usual; with no target yet, `present` says
 * whether any If-Match was sent (which then cannot match).
 */
export interface UpsertCondition {
  present: boolean;
  allows: VersionCondition;
}

export function conditionOf(request: FastifyRequest): VersionCondition {
  const header = request.headers['if-match'];
  return header === undefined ? () => true : (version) => ifMatchAllows(header, version);
}

/** If-Match of a request that may create its target (see UpsertCondition). */
export function upsertConditionOf(request: FastifyRequest): UpsertCondition {
  return { present: request.headers['if-match'] !== undefined, allows: conditionOf(request) };
}

/** 201 Created (or its replay): Location, ETag and the record. */
export function sendCreated(request: FastifyRequest, reply: FastifyReply, result: IdempotentResult) {
  if (result.location) reply.header('location', result.location);
  if (result.version !== undefined) reply.header('etag', etagFor(result.version, request.format));
  if (result.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(result.status).send(result.body);
}

/** A response without content (204 after a delete, 308 redirects). */
export function sendEmpty(reply: FastifyReply, status: number) {
  return reply.code(status).send();
}
