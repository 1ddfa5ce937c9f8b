/**
 * Events as they happen (GET /v1/events/stream, Server-Sent Events) and the events kept
 * (GET /v1/events). EventSource cannot send the API key, so the stream is read with fetch and its
 * frames parsed here. Pausing keeps reading (the events wait in the tab and are counted);
 * resuming shows them all, in order. A dropped connection is opened again with Last-Event-ID, so
 * nothing is lost and nothing shown twice. Leaving the view closes the stream.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, credentialHeaders, get, withQuery, type Problem } from '../api.js';
import { count } from '../format.js';
import { href, navigate, type ViewProps } from '../router.js';
import { Badge, Header, JsonView, Notice, PagedTable, ProblemView, Section, Time, useLoad, usePaged } from '../ui.js';
import './audit.css';
import './events.css';

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

interface Live {
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
function useLiveEvents(types: string): Live & { pause: () => void; resume: () => void; clear: () => void } {
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

// ---------------------------------------------------------------------------------------------
// The views.

export function EventsView({ parts, params }: ViewProps): JSX.Element {
  const history = parts[0] === 'history';
  return (
    <>
      <Header title={history ? 'Events, history' : 'Events, live'}>
        <nav class="actions event-nav" aria-label="Events">
          <a href={href('events', typesQuery(params))} aria-current={history ? undefined : 'page'}>
            Live
          </a>
          <a href={href('events', 'history', historyQuery(params))} aria-current={history ? 'page' : undefined}>
            History
          </a>
        </nav>
      </Header>
      {history ? <EventHistory params={params} /> : <LiveEvents params={params} />}
    </>
  );
}

function typesQuery(params: URLSearchParams): Record<string, string | undefined> {
  return { types: params.get('types') ?? params.get('type') ?? undefined };
}

function historyQuery(params: URLSearchParams): Record<string, string | undefined> {
  const types = (params.get('types') ?? params.get('type') ?? '').split(',').filter((type) => type !== '');
  return { type: types.length === 1 ? types[0] : undefined };
}

/** The event types to choose from: the catalogue (GET /v1/event-types, public); none while it loads. */
function useEventTypes(): string[] {
  const catalogue = useLoad((signal) => get<{ data: { type: string }[] }>('/v1/event-types', undefined, signal), []);
  return catalogue.data?.data.map((entry) => entry.type) ?? [];
}

/** The record section a path like /v1/orders/12 points at, as a console link (built from its id). */
const SECTION_OF: Record<string, string> = {
  users: 'users',
  items: 'items',
  orders: 'orders',
  callers: 'callers',
  'webhook-endpoints': 'webhooks',
};
function consoleLinkOf(path: string): string | undefined {
  const match = /^\/v1\/([a-z-]+)\/([1-9][0-9]{0,15})(?:\/stock)?$/.exec(path);
  const section = match ? SECTION_OF[match[1]!] : undefined;
  return match && section ? href(section, Number(match[2])) : undefined;
}

function EventItem({ event }: { event: RowiEvent }): JSX.Element {
  const link = consoleLinkOf(event.path);
  return (
    <li class="event-item">
      <div class="event-head">
        <Badge tone="neutral">{event.type}</Badge>
        <Time at={event.created_at} />
        {link ? (
          <a href={link}>
            <code>{event.path}</code>
          </a>
        ) : (
          <code>{event.path}</code>
        )}
        <code class="audit-id audit-muted">{event.id}</code>
      </div>
      <details>
        <summary>Data</summary>
        <JsonView value={event.data} label={`Data of event ${event.id}`} />
      </details>
    </li>
  );
}

function ConnectionState({ live }: { live: Live }): JSX.Element {
  const { connection } = live;
  if (connection.state === 'stopped') return <Badge tone="bad">Stopped</Badge>;
  if (connection.state === 'connecting') return <Badge tone="neutral">Connecting…</Badge>;
  if (connection.state === 'reconnecting')
    return (
      <>
        <Badge tone="warn">Reconnecting…</Badge>{' '}
        <span>
          {connection.why ? `${connection.why}; ` : ''}attempt {connection.attempt}, in {connection.inSeconds} s, from
          the last event received
        </span>
      </>
    );
  if (live.paused)
    return (
      <>
        <Badge tone="warn">Paused</Badge>{' '}
        <span>
          {live.held.length === 1 ? '1 event has' : `${count(live.held.length)} events have`} arrived while paused
        </span>
      </>
    );
  return (
    <>
      <Badge tone="good">Live</Badge>{' '}
      <span>
        connected since <Time at={connection.since} />
      </span>
    </>
  );
}

function LiveEvents({ params }: { params: URLSearchParams }): JSX.Element {
  const types = params.get('types') ?? params.get('type') ?? '';
  const chosen = types.split(',').filter((type) => type !== '');
  const live = useLiveEvents(chosen.join(','));
  return (
    <>
      <p class="stat-note">
        Each change rowi commits, as it happens, newest first (the last {SHOWN_MOST} are kept here; History has the
        rest). Pausing stops the list from moving: the events that arrive meanwhile wait and are shown on Resume.
      </p>
      <TypeFilter chosen={chosen} />
      <Section title="Stream">
        <div class="event-bar">
          <p class="event-state" role="status">
            <ConnectionState live={live} />
          </p>
          <div class="actions">
            {live.paused ? (
              <button type="button" class="primary" onClick={live.resume}>
                Resume{live.held.length > 0 ? ` (${count(live.held.length)} new)` : ''}
              </button>
            ) : (
              <button type="button" onClick={live.pause} disabled={live.connection.state === 'stopped'}>
                Pause
              </button>
            )}
            <button type="button" onClick={live.clear} disabled={live.shown.length === 0}>
              Clear the list
            </button>
          </div>
        </div>
        {live.connection.state === 'stopped' ? (
          <ProblemView error={live.connection.problem} context="The stream stopped" />
        ) : null}
        <Notice>
          {live.resumed
            ? `Resumed: ${live.resumed.arrived === 1 ? '1 event' : `${count(live.resumed.arrived)} events`} arrived while paused${
                live.resumed.dropped > 0
                  ? `; the list keeps the newest ${SHOWN_MOST}, so ${count(live.resumed.dropped)} older ones are now only in History`
                  : ''
              }.`
            : undefined}
        </Notice>
        {live.shown.length === 0 ? (
          <p class="audit-muted">
            {live.connection.state === 'live' || live.paused
              ? 'No event yet since this page opened. Changes appear here as they are made.'
              : 'Waiting for the stream…'}
          </p>
        ) : null}
        <ul class="live-list" aria-label="Events, newest first">
          {live.shown.map((event) => (
            <EventItem key={event.id} event={event} />
          ))}
        </ul>
        {live.shown.length > 0 ? (
          <p class="stat-note">
            {count(live.shown.length)} {live.shown.length === 1 ? 'event' : 'events'} shown.
          </p>
        ) : null}
      </Section>
    </>
  );
}

function TypeFilter({ chosen }: { chosen: string[] }): JSX.Element {
  const all = useEventTypes();
  const [picked, setPicked] = useState<Set<string>>(() => new Set(chosen));
  const key = chosen.join(',');
  const lastKey = useRef(key);
  if (lastKey.current !== key) {
    lastKey.current = key;
    setPicked(new Set(chosen));
  }
  const options = [...new Set([...all, ...chosen])];
  const apply = (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault();
    const types = options.filter((type) => picked.has(type));
    navigate(href('events', { types: types.join(',') }));
  };
  return (
    <details class="panel event-filter">
      <summary>Event types: {chosen.length === 0 ? 'all' : chosen.join(', ')}</summary>
      <form onSubmit={apply} class="form">
        <fieldset class="event-types">
          <legend>Only these event types (none checked: all)</legend>
          <div class="checks">
            {options.map((type) => (
              <label key={type}>
                <input
                  type="checkbox"
                  checked={picked.has(type)}
                  onChange={(event) => {
                    const next = new Set(picked);
                    if (event.currentTarget.checked) next.add(type);
                    else next.delete(type);
                    setPicked(next);
                  }}
                />{' '}
                {type}
              </label>
            ))}
          </div>
        </fieldset>
        <div class="actions">
          <button type="submit" class="primary">
            Show these types
          </button>
          {chosen.length > 0 ? <a href={href('events')}>All types</a> : null}
        </div>
      </form>
    </details>
  );
}

function EventHistory({ params }: { params: URLSearchParams }): JSX.Element {
  const all = useEventTypes();
  const type = params.get('type') ?? '';
  const paged = usePaged<RowiEvent>('/v1/events', { type: type || undefined, limit: 50 });
  return (
    <>
      <p class="stat-note">The events rowi keeps (30 days by default), newest first.</p>
      <form class="panel filters" aria-label="Filter">
        <div class="field">
          <label class="field-label" for="events-history-type">
            Event type
          </label>
          <select
            id="events-history-type"
            value={type}
            onChange={(event) => navigate(href('events', 'history', { type: event.currentTarget.value || undefined }))}
          >
            <option value="">All types</option>
            {[...new Set([...all, ...(type ? [type] : [])])].map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </div>
      </form>
      <Section title="Kept events">
        <PagedTable
          paged={paged}
          caption="Events"
          rowKey={(event) => event.id}
          empty={type ? 'No event of this type is kept.' : 'No event is kept.'}
          columns={[
            { label: 'Time', render: (event) => <Time at={event.created_at} /> },
            { label: 'Type', render: (event) => event.type },
            {
              label: 'Path',
              render: (event) => {
                const link = consoleLinkOf(event.path);
                return link ? (
                  <a href={link}>
                    <code>{event.path}</code>
                  </a>
                ) : (
                  <code>{event.path}</code>
                );
              },
            },
            {
              label: 'Data',
              render: (event) => (
                <details>
                  <summary>Data</summary>
                  <JsonView value={event.data} label={`Data of event ${event.id}`} />
                </details>
              ),
            },
            { label: 'Event id', optional: true, render: (event) => <code class="audit-id">{event.id}</code> },
          ]}
        />
      </Section>
    </>
  );
}
