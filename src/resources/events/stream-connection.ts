import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { eventVisible, narrowerEventSight, type EventSight } from '../../db/visibility.js';
import type { FeedReader } from '../../outbox/feed.js';
import { presentEvent } from '../../outbox/outbox.js';
import type { StoredEvent } from '../../outbox/outbox.repository.js';
import type { Problem } from '../../http/problem.js';
import { metrics } from '../../observability/metrics.js';

/** What EventSource waits before it reconnects. */
const RETRY_MS = 2000;
/** How long a stream's last event may take to reach its client before the connection is reset anyway. */
const END_GRACE_MS = 1000;
/** A client that takes nothing of what waits for it for this many heartbeat intervals is cut off. */
const STALLED_HEARTBEATS = 2;

/** Why a stream ended (the label of rowi_event_streams_ended_total). */
export type EndReason = 'client' | 'slow_reader' | 'access' | 'shutdown' | 'error';

export interface StreamOptions {
  /** What the stream may send: the events the caller sees (by resource, whose records), and the types asked for. */
  sight: EventSight;
  types: ReadonlySet<string> | undefined;
  from: FeedReader['position'];
  heartbeatMs: number;
  /** Bytes one stream may hold unsent (ROWI_EVENTS_STREAM_BUFFER). */
  bufferBytes: number;
  /** The stream takes events again (its client caught up, its access was checked): the feed should look. */
  onReady: () => void;
  /** Once the connection is gone (its socket closed), whichever way it ended. */
  onGone: () => void;
}

/**
 * One open event stream (WHATWG HTML, Server-Sent Events) on its connection. What it holds is
 * bounded: it takes events from the feed only while less than `bufferBytes` wait unsent (so at
 * most that plus one event); then it pauses, and the events wait in the outbox, not in memory,
 * until the client has taken what was written ('drain'): the feed hands them over from the table.
 * A client that takes nothing for STALLED_HEARTBEATS heartbeat intervals has its connection reset,
 * which frees the socket and its buffers at once (it resumes with Last-Event-ID). A stream ended
 * for a reason the client can act on (its access, a shutdown) gets a last `stream.ended` event
 * carrying the problem, then its connection ends, and is reset if that does not happen within
 * END_GRACE_MS. Until its socket has closed, it counts.
 */
export class StreamConnection {
  readonly request: FastifyRequest;
  readonly reader: FeedReader;
  readonly #response: ServerResponse;
  readonly #socket: Socket;
  /** The resources of the sight, which the feed reads events of (narrowed in place). */
  readonly #resources: Set<string>;
  #sight: EventSight;
  readonly #options: StreamOptions;
  readonly #heartbeat: NodeJS.Timeout;
  /** Its access is being checked again: it takes nothing until that is done. */
  #held = false;
  /** Waiting for its client to take what was written; the timer cuts it off if that does not come. */
  #stalled: NodeJS.Timeout | undefined;
  #ending: EndReason | undefined;
  #gone = false;

  constructor(request: FastifyRequest, reply: FastifyReply, options: StreamOptions) {
    this.request = request;
    this.#response = reply.raw;
    this.#socket = request.raw.socket;
    this.#sight = options.sight;
    this.#resources = new Set(options.sight.keys());
    this.#options = options;
    const paused = () => this.#held || this.#stalled !== undefined || this.ended;
    this.reader = {
      position: options.from,
      resources: this.#resources,
      ...(options.types ? { types: options.types } : {}),
      get paused() {
        return paused();
      },
      deliver: (events) => this.#deliver(events),
    };
    reply.hijack();
    // The headers already set on the reply (request id, rate limit) go out with the stream's own.
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined && name !== 'vary') headers[name] = String(value);
    this.#response.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    // The connection's idle time-out would cut a quiet stream: heartbeats keep it, the time-out is off.
    this.#socket.setTimeout(0);
    this.#response.write(`retry: ${RETRY_MS}\n\n`);
    this.#heartbeat = setInterval(() => {
      if (!this.reader.paused) this.#response.write(': heartbeat\n\n');
    }, options.heartbeatMs);
    metrics.eventStreamsOpen.inc();
    const gone = () => {
      this.#gone = true;
      clearInterval(this.#heartbeat);
      clearTimeout(this.#stalled);
      metrics.eventStreamsOpen.dec();
      metrics.eventStreamsEnded.inc({ reason: this.#ending ?? 'client' });
      options.onGone();
    };
    // A client that left while the stream was being opened has no 'close' to come.
    if (this.#socket.destroyed) queueMicrotask(gone);
    else this.#socket.once('close', gone);
  }

  get ended(): boolean {
    return this.#ending !== undefined || this.#gone;
  }

  /** Takes nothing more until release(): its access is being checked again. */
  hold(): void {
    this.#held = true;
  }

  /** Keeps to what `now` (the events the caller sees now) allows, never widening; takes events again if it was held. */
  release(now: EventSight): void {
    this.#sight = narrowerEventSight(this.#sight, now);
    for (const resource of this.#resources) if (!this.#sight.has(resource)) this.#resources.delete(resource);
    if (!this.#held) return;
    this.#held = false;
    this.#options.onReady();
  }

  /** Ends the stream with a last `stream.ended` event saying why (an RFC 9457 problem), then its connection. */
  end(problem: Problem, reason: EndReason): void {
    if (this.ended) return;
    this.#ending = reason;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#stalled);
    this.request.log.info({ reason, problem: problem.type }, 'event stream ended by the server');
    const timer = setTimeout(() => reset(this.#socket), END_GRACE_MS);
    timer.unref();
    this.#socket.once('close', () => clearTimeout(timer));
    // Then FIN: a connection that carried a stream carries nothing after it.
    this.#response.end(`event: stream.ended\ndata: ${JSON.stringify(problem)}\n\n`, () => this.#socket.end());
  }

  /** Resets the connection at once: its client cannot be told more (it does not read, or the stream broke). */
  cut(reason: EndReason): void {
    if (this.#gone) return;
    this.#ending ??= reason;
    reset(this.#socket);
  }

  #deliver(events: StoredEvent[]): number {
    if (this.ended) return events.length;
    if (this.reader.paused) return 0;
    let taken = 0;
    for (const event of events) {
      if (this.#visible(event)) {
        const frame = Buffer.from(
          `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(presentEvent(event))}\n\n`,
        );
        if (!this.#fits(frame.length)) {
          this.#waitForClient();
          break;
        }
        this.#response.write(frame);
      }
      taken++;
    }
    return taken;
  }

  /**
   * Whether `more` bytes may be written: always to a stream with nothing unsent, or whose socket
   * still takes writes (less than its high-water mark unsent), so that one event larger than the
   * bound still goes; else while the bound holds.
   */
  #fits(more: number): boolean {
    const unsent = this.#response.writableLength;
    return unsent === 0 || !this.#response.writableNeedDrain || unsent + more <= this.#options.bufferBytes;
  }

  #waitForClient(): void {
    const stalledMs = STALLED_HEARTBEATS * this.#options.heartbeatMs;
    this.#stalled = setTimeout(() => {
      this.request.log.warn(
        { unsent: this.#response.writableLength, bound: this.#options.bufferBytes, stalled_ms: stalledMs },
        'event stream client took nothing of what waits for it: connection reset (it resumes with Last-Event-ID)',
      );
      this.cut('slow_reader');
    }, stalledMs);
    this.#response.once('drain', () => {
      clearTimeout(this.#stalled);
      this.#stalled = undefined;
      if (!this.ended) this.#options.onReady();
    });
  }

  #visible(event: StoredEvent): boolean {
    return eventVisible(this.#sight, event) && (this.reader.types === undefined || this.reader.types.has(event.type));
  }
}

/**
 * Closes a connection with a reset (RST): what the operating system still holds for a client that
 * does not read is dropped on both ends at once, where a FIN would wait behind megabytes of unsent
 * data until the connection times out. A TLS socket can only be destroyed.
 */
function reset(socket: Socket): void {
  if (socket instanceof TLSSocket || socket.destroyed) socket.destroy();
  else socket.resetAndDestroy();
}
