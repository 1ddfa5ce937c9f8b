import Type, { type Static } from 'typebox';
import { EVENT_TYPE_NAMES } from '../../outbox/event-types.js';
import { CREATED_RANGE_FILTERS, pageSchema, type CollectionSpec } from '../../http/paging.js';
import { REFUSED_CHARACTERS, SPACE_CHARACTERS, freeText } from '../../http/free-text.js';
import {
  EchoedReadOnly,
  Id,
  Nullable,
  RecordFields,
  Timestamp,
  builtPerCatalogue,
  oneOfLiterals,
} from '../../http/schemas.js';
import { EventId } from '../../engine/event-id.schema.js';

/**
 * A URL parser drops tab, CR and LF, so a URL holding them would list one host and call another:
 * the free-text rule's characters are refused, and spaces of every kind (a URL has none).
 */
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: `^[^${REFUSED_CHARACTERS}${SPACE_CHARACTERS}]+$`,
  'x-error': 'must be a URL without spaces, control characters or invisible (zero-width, bidirectional) characters',
  description:
    'where events are POSTed: https (http only for hosts in ROWI_WEBHOOK_ALLOW_HOSTS), never to a private, loopback or link-local address; stored as rowi calls it (the WHATWG URL serialisation: https://Hooks.Example.com becomes https://hooks.example.com/)',
});
const Description = freeText({
  maxLength: 500,
  visible: false,
  description: 'what the endpoint is for, up to 500 characters on one line',
});

/**
 * The fields of an endpoint before and after its events, which do not depend on the event types:
 * built at load, as a spread of a shared schema (Timestamp) must be, before the engine adds its
 * bound to it when routes are registered (route-completion.ts bound).
 */
const LEADING_FIELDS = {
  id: RecordFields.id,
  url: Url,
  owner_caller_id: Type.Union([Type.Integer({ ...Id }), Type.Null()], {
    readOnly: true,
    description:
      'the caller the endpoint acts for (its owner, the caller that created it): it is sent events only of resources this caller may read now, checked at every delivery. When that caller is deleted the endpoint is disabled, and the caller that enables it again becomes its owner. Only the owner may change the URL',
  }),
  description: Description,
};

const TRAILING_FIELDS = {
  enabled: Type.Boolean({
    description:
      'false: nothing is sent (set by a caller, or by rowi after ROWI_WEBHOOK_DISABLE_AFTER failed attempts in a row)',
  }),
  disabled_reason: Nullable(
    Type.String({
      readOnly: true,
      description: 'why rowi disabled the endpoint; null when a caller did, or when enabled',
    }),
  ),
  failed_attempts: Type.Integer({
    minimum: 0,
    readOnly: true,
    description: 'failed attempts in a row (a success resets it)',
  }),
  previous_secret_expires_at: Nullable(
    Type.String({
      ...Timestamp,
      readOnly: true,
      description: 'until when the secret before the last rotation still signs beside the current one',
    }),
  ),
  created_at: RecordFields.created_at,
  updated_at: RecordFields.updated_at,
};

const Secret = Type.String({
  description: 'the signing secret (whsec_ and base64, as Standard Webhooks): shown only in this answer',
});

/**
 * The endpoint's schemas, whose `events` name the types an endpoint may ask for: built from the
 * event types there are when the routes are registered, so a resource declared before the app
 * is built has its events subscribable.
 */
export const webhookEndpointSchemas = builtPerCatalogue(
  () => EVENT_TYPE_NAMES.join(' '),
  () => {
    /** The types an endpoint may ask for: every type but the ping (sent to one endpoint by hand), or * for all. */
    const SUBSCRIBABLE = EVENT_TYPE_NAMES.filter((type) => type !== 'webhook.ping');

    const EventTypeOrAll = oneOfLiterals(['*' as const, ...SUBSCRIBABLE], {
      title: 'SubscribedEventType',
      description: 'an event type, or * for every type',
    });

    const Events = Type.Array(EventTypeOrAll, {
      minItems: 1,
      maxItems: SUBSCRIBABLE.length,
      uniqueItems: true,
      description: 'the event types sent to the endpoint; ["*"] for all (of the resources its owner may read)',
    });

    const endpointFields = { ...LEADING_FIELDS, events: Events, ...TRAILING_FIELDS };

    const WebhookEndpointSchema = Type.Object(endpointFields, {
      additionalProperties: false,
      title: 'WebhookEndpoint',
    });

    const WebhookEndpointWithSecretSchema = Type.Object(
      { ...endpointFields, secret: Secret },
      { additionalProperties: false, title: 'WebhookEndpointWithSecret' },
    );

    const WebhookEndpointPageSchema = pageSchema(WebhookEndpointSchema, 'webhook_endpoints');

    const WebhookEndpointCreateSchema = Type.Object(
      {
        url: Url,
        events: Type.Optional(Events),
        enabled: Type.Optional(Type.Boolean({ default: true })),
        description: Type.Optional(Description),
      },
      { additionalProperties: false, title: 'WebhookEndpointCreate' },
    );

    const WebhookEndpointPatchSchema = Type.Object(
      {
        url: Type.Optional(Url),
        events: Type.Optional(Events),
        enabled: Type.Optional(Type.Boolean()),
        description: Type.Optional(Description),
        ...EchoedReadOnly,
      },
      { additionalProperties: false, title: 'WebhookEndpointPatch' },
    );
    return {
      WebhookEndpointSchema,
      WebhookEndpointWithSecretSchema,
      WebhookEndpointPageSchema,
      WebhookEndpointCreateSchema,
      WebhookEndpointPatchSchema,
    };
  },
);
type EndpointSchemas = ReturnType<typeof webhookEndpointSchemas>;
export type WebhookEndpoint = Static<EndpointSchemas['WebhookEndpointSchema']>;
export type WebhookEndpointCreate = Static<EndpointSchemas['WebhookEndpointCreateSchema']>;
export type WebhookEndpointPatch = Static<EndpointSchemas['WebhookEndpointPatchSchema']>;

/** What the operations that change an endpoint say of who may (endpoint-access.ts). */
export const WHO_MAY_CHANGE =
  'Only a caller that could have created the endpoint as it is may do this: one that may read every resource the endpoint sends events of for its owner; 403 webhook-endpoint-forbidden otherwise, with the scopes missing.';

export const WEBHOOK_ENDPOINTS_COLLECTION: CollectionSpec = {
  sortable: { id: 'integer', created_at: 'string' },
  filters: { ...CREATED_RANGE_FILTERS },
};

const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('dead')], {
  description:
    'pending: to be sent (now, or at next_attempt_at); succeeded: the endpoint answered 2xx; dead: given up after the retry schedule, or the endpoint was disabled (the dead letter: retry by hand)',
});

export const AttemptSchema = Type.Object(
  {
    attempted_at: Type.String({ ...Timestamp, description: 'when the attempt started' }),
    status_code: Type.Union([Type.Integer({ minimum: 100, maximum: 999 }), Type.Null()], {
      description: "the endpoint's answer; null when none came",
    }),
    duration_ms: Type.Integer({ minimum: 0, description: 'how long the attempt took' }),
    error: Nullable(Type.String({ description: 'why the attempt failed; null when it succeeded' })),
  },
  { additionalProperties: false, title: 'WebhookAttempt' },
);

export const DeliverySchema = Type.Object(
  {
    id: RecordFields.id,
    endpoint_id: Type.Integer({ ...Id, description: 'the endpoint it is sent to' }),
    event_id: Type.String({
      ...EventId,
      description: 'the event sent (GET /v1/events/{id}); its id is also the webhook-id header',
    }),
    event_type: Type.String({ description: 'the type of the event sent' }),
    resource: Nullable(
      Type.String({
        description:
          "the resource the event is about (an order's, an item's or a user's path), whose deliveries to this endpoint go in order; the webhook's `resource`. Null for a delivery made before rowi numbered them",
      }),
    ),
    sequence: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
      description:
        "its place among the deliveries of its resource to this endpoint, from 1; the webhook's `sequence`. Null for a delivery made before rowi numbered them",
    }),
    status: DeliveryStatus,
    next_attempt_at: Nullable(
      Type.String({ ...Timestamp, description: 'when the next attempt is due; null unless pending' }),
    ),
    attempts: Type.Array(AttemptSchema, { description: 'every attempt, oldest first' }),
    created_at: RecordFields.created_at,
    updated_at: RecordFields.updated_at,
  },
  { additionalProperties: false, title: 'WebhookDelivery' },
);

export const DeliveryPageSchema = pageSchema(DeliverySchema, 'webhook_deliveries');

export const DELIVERIES_COLLECTION: CollectionSpec = {
  sortable: { id: 'integer' },
  defaultSort: '-id',
  filters: { status: { schema: DeliveryStatus, column: 'status', operator: '=' }, ...CREATED_RANGE_FILTERS },
};

export const DeliveryParams = Type.Object({ id: Id, delivery_id: Id });
