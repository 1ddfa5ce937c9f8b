import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import { eventSightOf } from '../../auth/visibility.js';
import type { Config } from '../../config/config.js';
import { AppError } from '../../errors.js';
import type { EventFeed } from '../../outbox/feed.js';
import type { Db } from '../../db/database.js';
import { eventVisible, type EventSight } from '../../db/visibility.js';
import { findEventById, latestPosition, positionOf, type Position } from '../../outbox/outbox.repository.js';
import { problemFor } from '../../http/problem.js';
import { sendHeadOfStream } from '../../http/export.js';
import { RESPONSE_HEADERS, operation } from '../../http/schemas.js';
import { StreamHeaders, eventSchemas } from './events.schema.js';
import { StreamAccess } from './stream-access.js';
import { StreamConnection } from './stream-connection.js';

const SHUTTING_DOWN = new AppError(
  'service-unavailable',
  'This rowi instance is shutting down; reconnect with Last-Event-ID to resume where this stream ended.',
);

/**
 * GET /v1/events/stream: the caller's visible events as they commit, as Server-Sent Events
 * (WHATWG HTML). Each event's `id` is the event id, its `event` the type, its `data` the event as
 * GET /v1/events/{id} answers it. With Last-Event-ID (EventSource sends it when it reconnects) the
 * stream first replays every later event from the outbox, so nothing is missed across a
 * reconnect. A comment line every ROWI_EVENTS_HEARTBEAT seconds keeps idle connections open.
 * What a stream may send follows its caller's access (stream-access.ts); what it may hold unsent
 * is bounded (stream-connection.ts).
 */
export function registerEventStream(
  app: FastifyInstance,
  feed: EventFeed,
  config: Pick<Config, 'eventsHeartbeat' | 'eventsMaxStreams' | 'eventsStreamBuffer'>,
): void {
  const { db } = app;
  /** Open streams by caller, on this process. */
  const open = new Map<string, number>();
  const access = new StreamAccess(app.auth, app.log);
  app.addHook('onClose', async () => access.close());

  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/v1/events/stream',
    {
      schema: operation({
        operationId: 'streamEvents',
        permission: 'events:read',
        summary: 'Stream events as they happen (Server-Sent Events)',
        description:
          "The events the caller may see, as they commit, in text/event-stream: `id` is the event id, `event` its type, `data` the event as JSON (the stream is JSON only). Resume with Last-Event-ID (EventSource sends it by itself): every event after it is sent first. A comment line is sent when the stream is idle. The stream keeps to the caller's access as it changes, as its requests do (at once on the instance where the change was made, within a second elsewhere): it stops sending the events of a resource the caller may no longer read, and when its key or token stops working (revoked, expired, caller deleted) or loses events:read, its last event is `stream.ended`, whose data is the problem (401, 403) a request would get now. A shutdown also ends it with `stream.ended` (503): resume elsewhere with Last-Event-ID. A stream holds at most ROWI_EVENTS_STREAM_BUFFER bytes unsent: past it, what a slow client is owed waits in the outbox until it reads; a client that takes nothing for two ROWI_EVENTS_HEARTBEAT intervals is disconnected, and resumes with Last-Event-ID. At most ROWI_EVENTS_MAX_STREAMS open streams per caller on one instance, each counted until its connection has closed.",
        tags: ['events'],
        eventStream: true,
        querystring: eventSchemas().StreamQuery,
        headers: StreamHeaders,
        problems: [410],
        response: {
          200: {
            description: 'The stream: it stays open until the client or the server ends it',
            headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
            content: {
              'text/event-stream': {
                schema: Type.String({
                  description:
                    'Server-Sent Events: id, event and data (JSON) lines, a blank line after each event; lines starting with : are comments; when the server ends the stream, a last event `stream.ended` without id, whose data is an RFC 9457 problem saying why',
                }),
              },
            },
          },
        },
      }),
    },
    async (request, reply) => {
      const caller = request.context!.access;
      const key = caller.callerId === null ? `external:${caller.name}` : `caller:${caller.callerId}`;
      if ((open.get(key) ?? 0) >= config.eventsMaxStreams) {
        throw new AppError(
          'too-many-streams',
          `This caller already holds ${config.eventsMaxStreams} event streams open on this instance (ROWI_EVENTS_MAX_STREAMS); close one first.`,
          {
            headers: { 'retry-after': '10' },
          },
        );
      }
      // The place is taken before anything is awaited, so that streams opened at once cannot pass the limit together.
      open.set(key, (open.get(key) ?? 0) + 1);
      const leave = () => {
        const left = (open.get(key) ?? 1) - 1;
        if (left === 0) open.delete(key);
        else open.set(key, left);
      };
      const sight = eventSightOf(caller);
      let from;
      try {
        from = await startingPosition(db, request.headers, sight);
      } catch (error) {
        leave();
        throw error;
      }
      // HEAD answers the stream's headers and ends: a stream never ends by itself (and has no length).
      if (request.method === 'HEAD') {
        leave();
        reply
          .type('text/event-stream; charset=utf-8')
          .header('cache-control', 'no-store')
          .header('x-accel-buffering', 'no');
        return sendHeadOfStream(reply);
      }
      const { types } = request.query;
      let unsubscribe: (() => void) | undefined;
      const stream: StreamConnection = new StreamConnection(request, reply, {
        sight,
        types: types ? new Set(types.split(',')) : undefined,
        from,
        heartbeatMs: config.eventsHeartbeat * 1000,
        bufferBytes: config.eventsStreamBuffer,
        onReady: () => feed.wake(),
        // A stream counts, against the caller's limit and for the drain, until its socket has closed.
        onGone: () => {
          unsubscribe?.();
          access.delete(stream);
          app.openStreams.delete(drainable);
          leave();
        },
      });
      const drainable = { end: () => stream.end(problemFor(SHUTTING_DOWN, request), 'shutdown') };
      app.openStreams.add(drainable);
      access.add(stream);
      feed.add(stream.reader).then(
        (remove) => {
          if (stream.ended) remove();
          else unsubscribe = remove;
        },
        (error: unknown) => {
          app.db.outage.failed(request.log, 'event-streams', error, 'event stream could not start');
          stream.cut('error');
        },
      );
    },
  );
}

/**
 * Where a stream starts, fixed before its headers go out (an event committed once the client
 * holds the 200 is always sent): the outbox's end, or the event named by Last-Event-ID, which must
 * be one the caller may read.
 */
async function startingPosition(db: Db, headers: Static<typeof StreamHeaders>, sight: EventSight): Promise<Position> {
  const lastEventId = headers['last-event-id'];
  if (lastEventId === undefined) return latestPosition(db);
  const last = await findEventById(db, lastEventId);
  if (!last || !eventVisible(sight, last)) {
    throw new AppError(
      'last-event-unknown',
      `Last-Event-ID ${lastEventId} names no event kept for you (events are kept ROWI_EVENTS_RETENTION seconds); the stream cannot resume without a gap.`,
    );
  }
  return positionOf(last);
}
