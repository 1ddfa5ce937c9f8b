import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FeedReader } from '../../events/feed.js';
import { presentEvent } from '../../events/outbox.js';
import type { StoredEvent } from '../../events/outbox.repository.js';
import type { Problem } from '../../http/problem.js';
import { metrics } from '../../metrics.js';

/** What EventSource waits before it reconnects. */
const RETRY_MS = 2000;
/** How long a stream's last event may take to reach its client before the connection is destroyed anyway. */
const END_GRACE_MS = 1000;

/** Why a stream ended (the label of rowi_event_streams_ended_total). */
export type EndReason = 'client' | 'slow_reader' | 'access' | 'shutdown' | 'error';

export interface StreamOptions {
  /** What the stream may send: the caller's readable resources (narrowed in place) and the types asked for. */
  resources: Set<string>;
  types: ReadonlySet<string> | undefined;
  from: FeedReader['position'];
  heartbeatMs: number;
  /** Bytes one stream may hold unsent (ROWI_EVENTS_STREAM_BUFFER). */
  bufferBytes: number;
  /** Once the connection is gone (its socket closed), whichever way it ended. */
  onGone: () => void;
}

/**
 * One open event stream (WHATWG HTML, Server-Sent Events) on its connection. What it holds is
 * bounded: at most `bufferBytes` unsent (plus the one event being written); a client further
 * behind has its connection destroyed, which frees the buffers and the socket at once (it resumes
 * with Last-Event-ID). A stream ended for a reason the client can act on (its access, a shutdown)
 * gets a last `stream.ended` event carrying the problem, then its connection ends, and is
 * destroyed if that does not happen within END_GRACE_MS. Until its socket has closed, it counts.
 */
export class StreamConnection {
  readonly request: FastifyRequest;
  readonly reader: FeedReader;
  readonly #response: ServerResponse;
  readonly #socket: Socket;
  readonly #resources: Set<string>;
  readonly #bufferBytes: number;
  readonly #heartbeat: NodeJS.Timeout;
  /** Events handed over while the stream's access is being checked again: sent once it stands. */
  #held: { event: StoredEvent; frame: Buffer }[] | undefined;
  #heldBytes = 0;
  #ending: EndReason | undefined;
  #gone = false;

  constructor(request: FastifyRequest, reply: FastifyReply, options: StreamOptions) {
    this.request = request;
    this.#response = reply.raw;
    this.#socket = request.raw.socket;
    this.#resources = options.resources;
    this.#bufferBytes = options.bufferBytes;
    this.reader = { position: options.from, resources: options.resources, ...(options.types ? { types: options.types } : {}), deliver: (events) => this.#deliver(events) };
    reply.hijack();
    // The headers already set on the reply (request id, rate limit) go out with the stream's own.
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined && name !== 'vary') headers[name] = String(value);
    this.#response.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    // The connection's idle time-out would cut a quiet stream: heartbeats keep it, the time-out is off.
    this.#socket.setTimeout(0);
    this.#response.write(`retry: ${RETRY_MS}\n\n`);
    this.#heartbeat = setInterval(() => this.#send(Buffer.from(': heartbeat\n\n')), options.heartbeatMs);
    metrics.eventStreamsOpen.inc();
    const gone = () => {
      this.#gone = true;
      clearInterval(this.#heartbeat);
      this.#held = undefined;
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

  /** From now on events are held, not sent, until release(): the stream's access is being checked again. */
  hold(): void {
    this.#held ??= [];
  }

  /** Sends what was held, of what `readable` (the resources the caller may read now) still allows; never widens. */
  release(readable: ReadonlySet<string>): void {
    for (const resource of this.#resources) if (!readable.has(resource)) this.#resources.delete(resource);
    const held = this.#held ?? [];
    this.#held = undefined;
    this.#heldBytes = 0;
    for (const { event, frame } of held) if (this.#visible(event) && !this.#send(frame)) return;
  }

  /** Ends the stream with a last `stream.ended` event saying why (an RFC 9457 problem), then its connection. */
  end(problem: Problem, reason: EndReason): void {
    if (this.ended) return;
    this.#ending = reason;
    this.#held = undefined;
    clearInterval(this.#heartbeat);
    this.request.log.info({ reason, problem: problem.type }, 'event stream ended by the server');
    const timer = setTimeout(() => reset(this.#socket), END_GRACE_MS);
    timer.unref();
    this.#socket.once('close', () => clearTimeout(timer));
    // Then FIN: a connection that carried a stream carries nothing after it.
    this.#response.end(`event: stream.ended\ndata: ${JSON.stringify(problem)}\n\n`, () => this.#socket.end());
  }

  /** Destroys the connection at once: its client cannot be told more (it does not read, or the stream broke). */
  cut(reason: EndReason): void {
    if (this.#gone) return;
    this.#ending ??= reason;
    reset(this.#socket);
  }

  #deliver(events: StoredEvent[]): void {
    for (const event of events) {
      if (this.ended) return;
      if (!this.#visible(event)) continue;
      const frame = Buffer.from(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(presentEvent(event))}\n\n`);
      if (this.#held === undefined) {
        if (!this.#send(frame)) return;
      } else if (this.#fits(frame.length)) {
        this.#held.push({ event, frame });
        this.#heldBytes += frame.length;
      } else {
        this.#tooSlow(this.#heldBytes + frame.length);
        return;
      }
    }
  }

  /** Writes unless the stream would hold more than its bound unsent; false when that ended it. */
  #send(bytes: Buffer): boolean {
    if (this.ended) return false;
    if (!this.#fits(bytes.length)) {
      this.#tooSlow(this.#response.writableLength + bytes.length);
      return false;
    }
    this.#response.write(bytes);
    return true;
  }

  /** Whether `more` bytes may be queued: one thing is always sent to a stream that has nothing unsent. */
  #fits(more: number): boolean {
    const unsent = this.#response.writableLength + this.#heldBytes;
    return unsent === 0 || unsent + more <= this.#bufferBytes;
  }

  #tooSlow(wouldHold: number): void {
    this.request.log.warn({ unsent: this.#response.writableLength + this.#heldBytes, would_hold: wouldHold, bound: this.#bufferBytes }, 'event stream client reads too slowly: connection closed (it resumes with Last-Event-ID)');
    this.cut('slow_reader');
  }

  #visible(event: StoredEvent): boolean {
    return this.#resources.has(event.resource) && (this.reader.types === undefined || this.reader.types.has(event.type));
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
