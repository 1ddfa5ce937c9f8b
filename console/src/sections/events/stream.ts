/**
 * The live stream of events (GET /v1/events/stream, Server-Sent Events). EventSource cannot send
 * the API key, so the stream is read with fetch and its frames parsed here. Pausing keeps reading
 * (the events wait in the tab and are counted); resuming shows them all, in order. A dropped
 * connection is opened again with Last-Event-ID, so nothing is lost and nothing shown twice.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, credentialHeaders, get, withQuery, type Problem } from '../../api.js';

export interface RowiEvent {
  id: string;
  type: string;
  created_at: string;
  path: string;
  data: unknown;
}

/** The most events the live list shows; older ones are in History. */
export const SHOWN_MOST = 200;

// ---------------------------------------------------------------------------------------------
// Server-Sent Events, parsed as the HTML standard says (fields id, event, data, retry; comments).

export interface SseFrame {
  id: string | undefined;
  event: string;
  data: string;
}

/** Parses a text/event-stream as it arrives in pieces; `feed` returns the frames completed. */
export class SseParser {
  #buffer = '';
  #id: string | undefined;
  #event = '';
  #data: string[] = [];
  #any = false;
  /** The reconnection time the server asked for (`retry:`), if it did. */
  retry: number | undefined;

  feed(text: string): SseFrame[] {
    this.#buffer += text;
    const frames: SseFrame[] = [];
    for (;;) {
      const end = this.#buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      // A CR at the end of what has arrived may be the first half of a CRLF: wait for more.
      if (this.#buffer[end] === '\r' && end === this.#buffer.length - 1) break;
      const line = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + (this.#buffer.startsWith('\r\n', end) ? 2 : 1));
      const frame = this.#line(line);
      if (frame !== undefined) frames.push(frame);
    }
    return frames;
  }

  #line(line: string): SseFrame | undefined {
    if (line === '') {
      if (!this.#any) return undefined;
      const frame = { id: this.#id, event: this.#event || 'message', data: this.#data.join('\n') };
      this.#id = undefined;
      this.#event = '';
      this.#data = [];
      this.#any = false;
      return frame;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.#data.push(value);
      this.#any = true;
    } else if (field === 'event') {
      this.#event = value;
      this.#any = true;
    } else if (field === 'id' && !value.includes('\0')) {
      this.#id = value;
      this.#any = true;
    } else if (field === 'retry' && /^\d+$/.test(value)) {
      this.retry = Number(value);
    }
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The live stream.

type Connection =
  | { state: 'connecting' }
  | { state: 'live'; since: string }
  | { state: 'reconnecting'; attempt: number; inSeconds: number; why: string }
  | { state: 'stopped'; problem: ApiError };

export interface Live {
  /** The types this state is of: until the stream of new types has begun, the old state is not shown. */
  types: string;
  connection: Connection;
  /** Newest first, at most SHOWN_MOST. */
  shown: RowiEvent[];
  paused: boolean;
  /** Events that arrived while paused, oldest first. */
  held: RowiEvent[];
  /** What the last resume said: how many had arrived while paused, how many fell off the list. */
  resumed: { arrived: number; dropped: number } | undefined;
}

/** What a problem body of a stream refusal or `stream.ended` says, as an ApiError. */
function problemFrom(body: unknown, status: number, fallback: string): ApiError {
  const problem = body as Partial<Problem> | null;
  return new ApiError({
    ...(problem ?? {}),
    type: typeof problem?.type === 'string' ? problem.type : 'about:blank',
    title: typeof problem?.title === 'string' ? problem.title : fallback,
    status: typeof problem?.status === 'number' ? problem.status : status,
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** The stream of `types` (all when empty) while the view is open: what it shows, pause and resume. */
export function useLiveEvents(types: string): Live & { pause: () => void; resume: () => void; clear: () => void } {
  const [live, setLive] = useState<Live>({
    types,
    connection: { state: 'connecting' },
    shown: [],
    paused: false,
    held: [],
    resumed: undefined,
  });
  const pausedRef = useRef(false);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    pausedRef.current = false;
    setLive({ types, connection: { state: 'connecting' }, shown: [], paused: false, held: [], resumed: undefined });
    /** The id of the last event received (shown or held): where a new connection resumes. */
    let lastId: string | undefined;
    const seen = new Set<string>();
    const seenOrder: string[] = [];

    const receive = (event: RowiEvent) => {
      if (signal.aborted || seen.has(event.id)) return;
      seen.add(event.id);
      seenOrder.push(event.id);
      if (seenOrder.length > 4 * SHOWN_MOST) seen.delete(seenOrder.shift()!);
      setLive((previous) =>
        pausedRef.current
          ? { ...previous, held: [...previous.held, event] }
          : { ...previous, shown: [event, ...previous.shown].slice(0, SHOWN_MOST) },
      );
    };
    const setConnection = (connection: Connection) => {
      if (!signal.aborted) setLive((previous) => ({ ...previous, connection }));
    };

    void (async () => {
      let attempt = 0;
      let retryMs = 1000;
      let why = '';
      while (!signal.aborted) {
        if (attempt > 0) {
          const wait = Math.min(retryMs * 2 ** (attempt - 1), 15_000);
          setConnection({ state: 'reconnecting', attempt, inSeconds: Math.ceil(wait / 1000), why });
          await sleep(wait, signal);
          if (signal.aborted) return;
        }
        let response: Response;
        try {
          response = await fetch(withQuery('/v1/events/stream', { types }), {
            headers: {
              accept: 'text/event-stream',
              ...credentialHeaders(),
              ...(lastId !== undefined ? { 'last-event-id': lastId } : {}),
            },
            cache: 'no-store',
            credentials: 'omit',
            signal,
          });
        } catch {
          if (signal.aborted) return;
          attempt++;
          why = 'rowi did not answer';
          continue;
        }
        if (!response.ok || response.body === null) {
          const body: unknown = await response.json().catch(() => null);
          const problem = problemFrom(body, response.status, response.statusText || `HTTP ${response.status}`);
          if (response.status === 401) {
            // Signs the console out, as every 401 of the console does.
            void get('/v1/callers/me').catch(() => undefined);
          }
          if (response.status === 429 || response.status >= 500) {
            attempt++;
            why = problem.problem.title;
            continue;
          }
          setConnection({ state: 'stopped', problem });
          return;
        }
        setConnection({ state: 'live', since: new Date().toISOString() });
        attempt = 0;
        const parser = new SseParser();
        const decoder = new TextDecoder();
        const reader = response.body.getReader();
        let ended: ApiError | undefined;
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            for (const frame of parser.feed(decoder.decode(value, { stream: true }))) {
              if (frame.event === 'stream.ended') {
                ended = problemFrom(safeJson(frame.data), 503, 'The stream was ended');
                continue;
              }
              const event = safeJson(frame.data) as RowiEvent | undefined;
              if (event === undefined || typeof event.id !== 'string') continue;
              if (frame.id !== undefined && frame.id !== '') lastId = frame.id;
              receive(event);
            }
            if (parser.retry !== undefined) retryMs = Math.max(parser.retry, 250);
          }
        } catch {
          if (signal.aborted) return;
        }
        if (signal.aborted) return;
        if (ended !== undefined && ended.status !== 503) {
          if (ended.status === 401) void get('/v1/callers/me').catch(() => undefined);
          setConnection({ state: 'stopped', problem: ended });
          return;
        }
        attempt = 1;
        why = ended !== undefined ? ended.problem.title : 'the connection was closed';
      }
    })();
    return () => controller.abort();
  }, [types]);

  const current: Live =
    live.types === types
      ? live
      : { types, connection: { state: 'connecting' }, shown: [], paused: false, held: [], resumed: undefined };
  return {
    ...current,
    pause: () => {
      pausedRef.current = true;
      setLive((previous) => ({ ...previous, paused: true, held: [], resumed: undefined }));
    },
    resume: () => {
      pausedRef.current = false;
      setLive((previous) => {
        const all = [...[...previous.held].reverse(), ...previous.shown];
        return {
          ...previous,
          paused: false,
          held: [],
          shown: all.slice(0, SHOWN_MOST),
          resumed: { arrived: previous.held.length, dropped: Math.max(0, all.length - SHOWN_MOST) },
        };
      });
    },
    clear: () => setLive((previous) => ({ ...previous, shown: [], resumed: undefined })),
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
