/** The live events: the stream's state, pause and resume, the list, the types shown. */
import type { JSX } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { count } from '../../format.js';
import { href, navigate } from '../../router.js';
import { Badge, JsonView, Notice, ProblemView, Section, Time } from '../../ui.js';
import { consoleLinkOf, useEventTypes } from './shared.js';
import { SHOWN_MOST, useLiveEvents, type Live, type RowiEvent } from './stream.js';

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

export function LiveEvents({ params }: { params: URLSearchParams }): JSX.Element {
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
