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
    status: {
      schema: Type.Integer({ minimum: 100, maximum: 599, description: 'only requests answered with this status' }),
      column: 'status',
      operator: '=',
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
