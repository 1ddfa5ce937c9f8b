import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { answerList, withExports } from '../../http/export.js';
import { selectFields } from '../../http/fields.js';
import { findAuditEvents } from '../../audit-trail/audit.repository.js';
import { ACTIONS } from '../../auth/policy.js';
import {
  INTEGER_IDS,
  listQuerySchema,
  pageSchema,
  parseListQuery,
  timeBound,
  type CollectionSpec,
} from '../../http/paging.js';
import {
  Id,
  Nullable,
  RecordFields,
  RESPONSE_HEADERS,
  Timestamp,
  oneOfLiterals,
  operation,
  representation,
  closedObject,
} from '../../http/schemas.js';

export const AuditEventSchema = Type.Object(
  {
    id: RecordFields.id,
    at: Type.String({ ...Timestamp, description: 'when the request arrived' }),
    request_id: Type.String({ description: "the request's X-Request-Id" }),
    caller_id: Type.Union([Id, Type.Null()], {
      description: 'the authenticated caller; null when none (or an external token)',
    }),
    caller_name: Nullable(Type.String({ description: "the caller's name, or the subject of an external token" })),
    credential: Nullable(Type.String({ description: 'api_key, oauth (a token rowi issued) or external' })),
    user_id: Type.Union([Id, Type.Null()], {
      description:
        'the user the request acted for (its subject; the caller is the actor), docs/access.md "Acting for a user"; null when it acted for nobody',
    }),
    method: Type.String(),
    path: Type.String({ description: 'the path, without the query string' }),
    resource: Nullable(
      Type.String({ description: 'the resource addressed (users, orders…); null for unknown paths and public routes' }),
    ),
    record_id: Nullable(Type.String({ description: 'the record addressed, when the path names one' })),
    action: Nullable(Type.String({ description: 'read, create, update or delete' })),
    status: Type.Integer({ description: 'the response status: 401/403 for refused requests' }),
    duration_ms: Type.Number({ description: 'time to answer, in milliseconds' }),
    client_ip: Nullable(
      Type.String({ description: 'the client address (from X-Forwarded-For only behind a trusted proxy)' }),
    ),
  },
  closedObject('audit_event', 'AuditEvent'),
);

const AuditEventPageSchema = pageSchema(AuditEventSchema, 'audit_events');

/** The methods rowi's routes answer; the refused requests of any other method are found by the other filters. */
const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;
/** The longest path a `path` filter takes: longer than any route of rowi's, as long as a URL usually goes. */
const MAX_PATH_FILTER = 2048;

export const AUDIT_COLLECTION: CollectionSpec = {
  ids: INTEGER_IDS,
  sortable: { id: 'integer' },
  defaultSort: '-id',
  filters: {
    caller_id: {
      schema: Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'only requests of this caller',
      }),
      column: 'caller_id',
      operator: '=',
    },
    user_id: {
      schema: Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'only requests that acted for this user',
      }),
      column: 'user_id',
      operator: '=',
    },
    resource: {
      schema: Type.String({ maxLength: 64, description: 'only requests on this resource (users, orders, callers…)' }),
      column: 'resource',
      operator: '=',
    },
    action: {
      schema: Type.Union(
        ACTIONS.map((action) => Type.Literal(action)),
        { description: 'only requests of this action' },
      ),
      column: 'action',
      operator: '=',
    },
    method: {
      schema: oneOfLiterals(HTTP_METHODS, { description: 'only requests of this HTTP method' }),
      column: 'method',
      operator: '=',
    },
    path: {
      schema: Type.String({
        minLength: 1,
        maxLength: MAX_PATH_FILTER,
        pattern: '^/[^?]*$',
        'x-error': `must be a path that starts with / (no query string), at most ${MAX_PATH_FILTER} characters`,
        description:
          'only requests to this path and the paths below it, whole segments only: /v1/orders/12 finds /v1/orders/12 and /v1/orders/12/cancel, not /v1/orders/123; a path ending in / finds only those below it. Compared, case-sensitive, with the path as the request sent it (its percent-escapes not decoded) without the query string',
      }),
      column: 'path',
      operator: 'under',
    },
    record_id: {
      schema: Type.String({
        minLength: 1,
        maxLength: 256,
        description: 'only requests that addressed the record of this id: record_id, compared as text',
      }),
      column: 'record_id',
      operator: '=',
    },
    status: {
      schema: Type.Integer({ minimum: 100, maximum: 599, description: 'only requests answered with this status' }),
      column: 'status',
      operator: '=',
    },
    status_class: {
      schema: oneOfLiterals(STATUS_CLASSES, {
        description: 'only requests answered with a status of this class: 4xx is 400–499',
      }),
      column: 'status',
      operator: 'between',
      range: (statusClass) => {
        const hundreds = Number(statusClass[0]) * 100;
        return [hundreds, hundreds + 99];
      },
    },
    after: timeBound('at', 'after', 'requests that arrived'),
    before: timeBound('at', 'before', 'requests that arrived'),
  },
};

/**
 * GET /v1/audit-events (docs/security.md), newest first. Events are written in batches, so the last
 * second or so of requests may not be listed yet.
 */
const auditRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;
  app.get(
    '/v1/audit-events',
    {
      schema: operation({
        operationId: 'listAuditEvents',
        permission: 'audit-events:read',
        summary: 'List audit events, newest first',
        description:
          'One event per request, allowed or refused. Events are written in batches about once a second, so the newest may not be listed yet.',
        tags: ['audit'],
        querystring: listQuerySchema(AUDIT_COLLECTION, { record: AuditEventSchema }),
        response: {
          200: withExports(
            representation(AuditEventPageSchema, 'A page of audit events', RESPONSE_HEADERS.link),
            AuditEventSchema,
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(AUDIT_COLLECTION, request.query);
      const fields = selectFields({ record: AuditEventSchema }, request.query.fields);
      const list = (page: typeof query) => findAuditEvents(db, page);
      const listing = { name: 'audit-events', record: AuditEventSchema, query, list, fields };
      return answerList(request, reply, listing, app.config);
    },
  );
};

export default auditRoutes;
