import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { Config } from '../../config/config.js';
import type { EventFeed } from '../../outbox/feed.js';
import { answerList, withExports } from '../../http/export.js';
import { fieldsParameter, selectFields } from '../../http/fields.js';
import { entityTag } from '../../http/etag.js';
import { listQuerySchema, parseListQuery } from '../../http/paging.js';
import { sendTagged } from '../../http/records.js';
import {
  IfNoneMatchHeaders,
  RESPONSE_HEADERS,
  header,
  noContent,
  operation,
  representation,
} from '../../http/schemas.js';
import { EVENT_TYPE_NAMES, EVENT_TYPES } from '../../outbox/event-types.js';
import { exampleEvents } from './event-examples.js';
import { EventParams, eventSchemas } from './events.schema.js';
import { getEvent, listEvents } from './events.service.js';
import { registerEventStream } from './stream.js';

const DESCRIPTION =
  'Every change a caller can see is an event, written in the transaction of the change: a committed change always has its event, a rolled-back one never. A caller sees the events of the resources it may read (orders:read for order events…). Events are kept ROWI_EVENTS_RETENTION seconds (30 days by default).';

/** GET /v1/events, /v1/events/{id} and the live stream (docs/events.md). */
const eventsRoutes: FastifyPluginAsyncTypebox<{ feed: EventFeed; config: Config }> = async (app, { feed, config }) => {
  const { db } = app;
  const { EVENTS_COLLECTION, EventPageSchema, EventSchema, EventTypeCatalogueSchema } = eventSchemas();
  const EVENT_FIELDS = { record: EventSchema };
  app.get(
    '/v1/events',
    {
      schema: operation({
        operationId: 'listEvents',
        permission: 'events:read',
        summary: 'List events, newest first',
        description: DESCRIPTION,
        tags: ['events'],
        querystring: listQuerySchema(EVENTS_COLLECTION, EVENT_FIELDS),
        response: {
          200: withExports(
            representation(EventPageSchema, 'A page of events', RESPONSE_HEADERS.link, ['json']),
            EventSchema,
          ),
        },
      }),
    },
    async (request, reply) => {
      const query = parseListQuery(EVENTS_COLLECTION, request.query as Record<string, unknown>);
      const fields = selectFields(EVENT_FIELDS, (request.query as { fields?: string }).fields);
      const list = (page: typeof query) => listEvents(db, page, request.context!.access);
      return answerList(request, reply, { name: 'events', record: EventSchema, query, list, fields }, config);
    },
  );

  app.get(
    '/v1/events/:id',
    {
      schema: operation({
        operationId: 'getEvent',
        permission: 'events:read',
        summary: 'Read one event',
        description:
          'An event never changes: its ETag is its id. 404 also for an event of a resource the caller may not read.',
        tags: ['events'],
        params: EventParams,
        querystring: Type.Object({ fields: fieldsParameter(EVENT_FIELDS) }),
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(EventSchema, 'The event', RESPONSE_HEADERS.etag, ['json']),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      const fields = selectFields(EVENT_FIELDS, request.query.fields);
      const event = await getEvent(db, request.params.id, request.context!.access);
      return sendTagged(request, reply, event, entityTag(event.id, 'json', false, fields), 200, fields);
    },
  );

  /**
   * Public, as the OpenAPI document is: it is documentation (every type and its description are in
   * the document already, the examples are made up), and a receiver's developer may hold no key.
   * Made once, from the document, when first asked: it changes only with rowi's version and the
   * resources declared, never while a process runs.
   */
  let catalogue: { body: string; etag: string } | undefined;
  app.get(
    '/v1/event-types',
    {
      schema: operation({
        operationId: 'listEventTypes',
        permission: 'public',
        summary: 'The event types, each with an example event',
        description:
          'Every type of event rowi writes, in the order of the catalogue (those of a resource together), with the resource whose read scope sees it, what it tells, and an example event exactly as GET /v1/events/{id} answers it (a webhook body is that, with resource and sequence). Public, like the OpenAPI document.',
        tags: ['events'],
        headers: IfNoneMatchHeaders,
        response: {
          200: representation(
            EventTypeCatalogueSchema,
            'The event types',
            {
              ...RESPONSE_HEADERS.etag,
              'Cache-Control': header('public, max-age=3600: it changes only with the version of rowi'),
            },
            ['json'],
          ),
          304: noContent('The copy the client holds is current', RESPONSE_HEADERS.etag),
        },
      }),
    },
    async (request, reply) => {
      catalogue ??= eventTypeCatalogue(app.swagger() as unknown as Record<string, unknown>);
      reply.header('cache-control', 'public, max-age=3600').type('application/json; charset=utf-8');
      return sendTagged(request, reply, catalogue.body, catalogue.etag);
    },
  );

  registerEventStream(app, feed, config);
};

/** The catalogue's answer, serialised once, and its tag (a digest of it). */
function eventTypeCatalogue(document: Record<string, unknown>): { body: string; etag: string } {
  const examples = exampleEvents(document);
  const data = EVENT_TYPE_NAMES.map((type) => {
    const { resource, description } = EVENT_TYPES[type]!;
    return { type, resource, description, example: examples.get(type)! };
  });
  const body = JSON.stringify({ data });
  return { body, etag: entityTag(createHash('sha256').update(body).digest('base64url').slice(0, 22), 'json') };
}

export default eventsRoutes;
