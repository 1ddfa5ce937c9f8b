import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import Type from 'typebox';
import { readableResources } from '../../auth/policy.js';
import type { Config } from '../../config.js';
import { AppError } from '../../errors.js';
import type { EventFeed, FeedReader } from '../../events/feed.js';
import { presentEvent } from '../../events/outbox.js';
import { findEventById, latestPosition, positionOf, type StoredEvent } from '../../events/outbox.repository.js';
import { RESPONSE_HEADERS, operation } from '../../http/schemas.js';
import { StreamHeaders, StreamQuery } from './events.schema.js';

/** A stream whose client reads slower than events come is ended past this much unsent; it resumes with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** What EventSource waits before it reconnects. */
const RETRY_MS = 2000;

/**
 * GET /v1/events/stream: the caller's visible events as they commit, as Server-Sent Events
 * (WHATWG HTML). Each event's `id` is the event id, its `event` the type, its `data` the event as
 * GET /v1/events/{id} answers it. With Last-Event-ID (EventSource sends it when it reconnects) the
 * stream first replays every later event from the outbox, so nothing is missed across a
 * reconnect. A comment line every ROWI_EVENTS_HEARTBEAT seconds keeps idle connections open.
 */
export function registerEventStream(app: FastifyInstance, feed: EventFeed, config: Pick<Config, 'eventsHeartbeat' | 'eventsMaxStreams'>): void {
  const { db } = app;
  const open = new Map<string, number>();

  app.get('/v1/events/stream', {
    schema: operation({
      operationId: 'streamEvents',
      permission: 'events:read',
      summary: 'Stream events as they happen (Server-Sent Events)',
      description:
        'The events the caller may see, as they commit, in text/event-stream: `id` is the event id, `event` its type, `data` the event as JSON (the stream is JSON only). Resume with Last-Event-ID (EventSource sends it by itself): every event after it is sent first. A comment line is sent when the stream is idle. At most ROWI_EVENTS_MAX_STREAMS open streams per caller on one instance.',
      tags: ['events'],
      eventStream: true,
      querystring: StreamQuery,
      headers: StreamHeaders,
      problems: [410],
      response: {
        200: {
          description: 'The stream: it stays open until the client or the server ends it',
          headers: { ...RESPONSE_HEADERS.requestId, ...RESPONSE_HEADERS.rateLimit },
          content: { 'text/event-stream': { schema: Type.String({ description: 'Server-Sent Events: id, event and data (JSON) lines, a blank line after each event; lines starting with : are comments' }) } },
        },
      },
    }),
  }, async (request, reply) => {
    const principal = request.principal!;
    // HEAD answers the stream's headers and ends: a stream never ends by itself.
    const key = principal.callerId === null ? `external:${principal.name}` : `caller:${principal.callerId}`;
    if ((open.get(key) ?? 0) >= config.eventsMaxStreams) {
      throw new AppError('too-many-streams', `This caller already holds ${config.eventsMaxStreams} event streams open on this instance (ROWI_EVENTS_MAX_STREAMS); close one first.`, {
        headers: { 'retry-after': '10' },
      });
    }
    const resources = new Set(readableResources(principal.scopes));
    const { types } = request.query as Static<typeof StreamQuery>;
    const lastEventId = (request.headers as Static<typeof StreamHeaders>)['last-event-id'];
    // Where the stream starts is fixed before its headers go out: an event committed once the
    // client holds the 200 is always sent.
    let from = await latestPosition(db);
    if (lastEventId !== undefined) {
      const last = await findEventById(db, lastEventId);
      if (!last || !resources.has(last.resource)) {
        throw new AppError('last-event-unknown', `Last-Event-ID ${lastEventId} names no event kept for you (events are kept ROWI_EVENTS_RETENTION seconds); the stream cannot resume without a gap.`);
      }
      from = positionOf(last);
    }
    if (request.method === 'HEAD') return reply.type('text/event-stream; charset=utf-8').header('cache-control', 'no-store').send();
    open.set(key, (open.get(key) ?? 0) + 1);
    startStream(request, reply, {
      feed,
      heartbeatMs: config.eventsHeartbeat * 1000,
      reader: { resources, ...(types ? { types: new Set(types.split(',')) } : {}) },
      from,
      onEnd: () => {
        const left = (open.get(key) ?? 1) - 1;
        if (left === 0) open.delete(key);
        else open.set(key, left);
      },
    });
  });
}

interface StreamOptions {
  feed: EventFeed;
  heartbeatMs: number;
  reader: Pick<FeedReader, 'resources' | 'types'>;
  from: FeedReader['position'];
  onEnd: () => void;
}

function startStream(request: FastifyRequest, reply: FastifyReply, options: StreamOptions): void {
  const { feed } = options;
  const response = reply.raw;
  reply.hijack();
  // The headers already set on the reply (request id, rate limit) go out with the stream's own.
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined && name !== 'vary') headers[name] = String(value);
  response.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  // The connection's idle time-out would cut a quiet stream: heartbeats keep it, the time-out is off.
  request.raw.socket.setTimeout(0);
  response.write(`retry: ${RETRY_MS}\n\n`);

  let ended = false;
  let unsubscribe: (() => void) | undefined;
  const stream = { end: () => finish() };
  const heartbeat = setInterval(() => response.write(': heartbeat\n\n'), options.heartbeatMs);
  const finish = () => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    unsubscribe?.();
    request.server.openStreams.delete(stream);
    options.onEnd();
    if (!response.writableEnded) response.end();
  };
  request.server.openStreams.add(stream);
  response.on('close', finish);

  const reader: FeedReader = {
    ...options.reader,
    position: options.from,
    deliver: (events: StoredEvent[]) => {
      if (ended) return;
      response.write(events.map(frame).join(''));
      if (response.writableLength > MAX_BUFFERED_BYTES) {
        request.log.warn({ buffered: response.writableLength }, 'event stream client reads too slowly: stream ended (it resumes with Last-Event-ID)');
        finish();
      }
    },
  };
  void (async () => {
    unsubscribe = await feed.add(reader);
    if (ended) unsubscribe();
  })().catch((error: unknown) => {
    request.log.error({ err: error }, 'event stream could not start');
    finish();
  });
}

function frame(event: StoredEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(presentEvent(event))}\n\n`;
}
