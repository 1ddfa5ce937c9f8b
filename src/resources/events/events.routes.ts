import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { Config } from '../../config/config.js';
import type { EventFeed } from '../../outbox/feed.js';
import { answerList, withExports } from '../../http/export.js';
import { fieldsParameter, selectFields } from '../../http/fields.js';
import { entityTag } from '../../http/etag.js';
import { listQuerySchema, parseListQuery } from '../../http/paging.js';
import { sendTagged } from '../../http/records.js';
import { IfNoneMatchHeaders, RESPONSE_HEADERS, noContent, operation, representation } from '../../http/schemas.js';
import { EventParams, eventSchemas } from './events.schema.js';
import { getEvent, listEvents } from './events.service.js';
import { registerEventStream } from './stream.js';

const DESCRIPTION =
  'Every change a caller can see is an event, written in the transaction of the change: a committed change always has its event, a rolled-back one never. A caller sees the events of the resources it may read (orders:read for order events…). Events are kept ROWI_EVENTS_RETENTION seconds (30 days by default).';

/** GET /v1/events, /v1/events/{id} and the live stream (docs/events.md). */
const eventsRoutes: FastifyPluginAsyncTypebox<{ feed: EventFeed; config: Config }> = async (app, { feed, config }) => {
  const { db } = app;
  const { EVENTS_COLLECTION, EventPageSchema, EventSchema } = eventSchemas();
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

  registerEventStream(app, feed, config);
};

export default eventsRoutes;
