import Type from 'typebox';
import { Id, Nullable, Timestamp } from '../../http/schemas.js';

const Count = (description: string) => Type.Integer({ minimum: 0, description });

/** Whether a receiver keeps up, at a glance (GET /v1/webhook-endpoints/{id}/health). */
export const WebhookEndpointHealthSchema = Type.Object(
  {
    endpoint_id: Type.Integer({ ...Id, description: 'the endpoint' }),
    window_start: Type.String({
      ...Timestamp,
      description:
        'the start of the window counted: 24 hours before the answer. The counts of succeeded and dead deliveries and of attempts, and last_failure, are of this window',
    }),
    deliveries: Type.Object(
      {
        pending: Count(
          'deliveries waiting to be sent now, however old: due, or waiting for their next attempt after a failure (not only those of the window)',
        ),
        succeeded: Count('deliveries that succeeded in the window (the endpoint answered 2xx)'),
        dead: Count(
          'deliveries that went dead in the window: given up after the retry schedule, not sent (the event no longer kept, or one the owner may not read), or dead-lettered when the endpoint was disabled',
        ),
      },
      {
        additionalProperties: false,
        description:
          'deliveries by their status (those of GET …/deliveries?status=): every one pending now; those that became succeeded or dead in the window. A delivery sent again by hand counts by its latest status',
      },
    ),
    attempts: Type.Object(
      {
        total: Count('attempts made in the window'),
        succeeded: Count('of them, those the endpoint answered with 2xx in time'),
        failed: Count(
          'of them, those that failed (an error status, no answer in time, a refused address), and turns in which nothing was sent, whose error says why',
        ),
      },
      { additionalProperties: false, description: 'the attempts of all its deliveries made in the window' },
    ),
    success_rate: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], {
      description:
        'attempts.succeeded / attempts.total, rounded to three decimals; null when no attempt was made in the window',
    }),
    lag_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description:
        'how long the oldest pending delivery has waited, in milliseconds since the delivery was made (one sent again by hand counts from then too); null when none is pending',
    }),
    last_success_at: Nullable(
      Type.String({
        ...Timestamp,
        description:
          'when the attempt was made that delivered the delivery succeeded last, of the deliveries kept (ROWI_EVENTS_RETENTION), not only those of the window; null when none',
      }),
    ),
    last_failure: Type.Union(
      [
        Type.Object(
          {
            at: Type.String({ ...Timestamp, description: 'when the failed attempt was made' }),
            delivery_id: Type.Integer({
              ...Id,
              description: 'its delivery (GET /v1/webhook-endpoints/{id}/deliveries/{delivery_id})',
            }),
            status_code: Type.Union([Type.Integer({ minimum: 100, maximum: 999 }), Type.Null()], {
              description: "the endpoint's answer; null when none came (a time-out, a refused connection, not sent)",
            }),
            error: Nullable(Type.String({ description: 'why the attempt failed' })),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'the latest failed attempt in the window; null when none failed in it' },
    ),
  },
  {
    additionalProperties: false,
    title: 'WebhookEndpointHealth',
    description:
      "whether the endpoint's receiver keeps up: its deliveries pending now and how long the oldest has waited, what succeeded and failed in the last 24 hours, and when a delivery last succeeded",
  },
);
