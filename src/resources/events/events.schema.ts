import Type from 'typebox';
import { EVENT_TYPE_NAMES, EVENT_TYPES } from '../../outbox/event-types.js';
import { EVENT_ID_PATTERN, firstEventIdAt, lastEventIdAt } from '../../outbox/event-ids.js';
import { CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { RecordFields, builtPerCatalogue } from '../../http/schemas.js';
import { EventId } from '../../engine/event-id.schema.js';

/**
 * Built at load: spread later, it would copy the bound the engine adds to the shared
 * RecordFields.created_at once routes are registered (route-completion.ts bound).
 */
const CreatedAt = Type.String({ ...RecordFields.created_at, description: 'when the change was made (RFC 3339, UTC)' });

/**
 * The schemas that name the event types (the `type` enum, the list's filter, the stream's query),
 * built from the types there are when the routes are registered: a resource declared before
 * the app is built has its events listed.
 */
export const eventSchemas = builtPerCatalogue(
  () => EVENT_TYPE_NAMES.join(' '),
  () => {
    const EventTypeSchema = Type.Union(
      EVENT_TYPE_NAMES.map((type) => Type.Literal(type)),
      {
        description: `the event type: ${EVENT_TYPE_NAMES.map((type) => `${type} (${EVENT_TYPES[type]!.description})`).join('; ')}`,
      },
    );

    const EventSchema = Type.Object(
      {
        id: EventId,
        type: EventTypeSchema,
        created_at: CreatedAt,
        path: Type.String({ description: 'the path of the resource the event is about' }),
        data: Type.Object(
          {},
          {
            additionalProperties: true,
            description: 'the resource as it was after the change (as GET answers it), or its id when it was deleted',
          },
        ),
      },
      { additionalProperties: false, title: 'Event' },
    );

    const EventPageSchema = pageSchema(EventSchema, 'events');

    const EventTypeDescriptionSchema = Type.Object(
      {
        // Not the enum again (it is Event.type's, with every type's description): the document stays small.
        type: Type.String({ description: 'the event type, one of those of Event.type (user.created …)' }),
        resource: Type.String({
          description:
            'the resource whose read scope sees events of this type (orders: orders:read), on GET /v1/events and the stream; a webhook endpoint is sent them while its owner has it',
        }),
        description: Type.String({ description: 'when an event of this type is written, and what its data is' }),
        // The example Event, as GET /v1/events/{id} answers it (described on the object: a $ref takes no description).
        example: EventSchema,
      },
      {
        additionalProperties: false,
        title: 'EventTypeDescription',
        description:
          'an event type, and in `example` an event of it as GET /v1/events/{id} answers it (a webhook body is that, with `resource` and `sequence`)',
      },
    );

    const EventTypeCatalogueSchema = Type.Object(
      {
        data: Type.Array(EventTypeDescriptionSchema, {
          description: 'every event type rowi writes, in the order of the catalogue: those of a resource together',
        }),
      },
      { additionalProperties: false, title: 'EventTypeCatalogue' },
    );

    const EVENTS_COLLECTION: CollectionSpec = {
      ids: { column: 'id', pattern: EVENT_ID_PATTERN.slice(1, -1), integer: false, says: 'event ids' },
      sortable: { id: 'string' },
      defaultSort: '-id',
      filters: {
        type: { schema: EventTypeSchema, column: 'type', operator: '=' },
        // Ids begin with their time, so a time range is an id range: the id index serves it.
        created_after: {
          ...CREATED_RANGE_FILTERS.created_after,
          column: 'id',
          normalize: (value: string) => lastEventIdAt(CREATED_RANGE_FILTERS.created_after.normalize(value)),
        },
        created_before: {
          ...CREATED_RANGE_FILTERS.created_before,
          column: 'id',
          normalize: (value: string) => firstEventIdAt(CREATED_RANGE_FILTERS.created_before.normalize(value)),
        },
      },
    };

    /** The stream's query: which types, comma-separated (all the caller may see when absent). */
    const StreamQuery = Type.Object(
      {
        types: Type.Optional(
          Type.String({
            pattern: `^(?:${EVENT_TYPE_NAMES.map((type) => type.replace('.', '\\.')).join('|')})(?:,(?:${EVENT_TYPE_NAMES.map((type) => type.replace('.', '\\.')).join('|')}))*$`,
            'x-error': `must be a comma-separated list of event types (${EVENT_TYPE_NAMES.join(', ')})`,
            description: 'only these event types, comma-separated',
          }),
        ),
      },
      { additionalProperties: false },
    );
    return {
      EventTypeSchema,
      EventSchema,
      EventPageSchema,
      EventTypeDescriptionSchema,
      EventTypeCatalogueSchema,
      EVENTS_COLLECTION,
      StreamQuery,
    };
  },
);

export const EventParams = Type.Object({ id: EventId });

export const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({ ...EventId, description: 'the id of the last event received: the stream resumes after it' }),
  ),
});
