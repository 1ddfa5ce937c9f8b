/**
 * Events as they happen (GET /v1/events/stream, Server-Sent Events; read in ./stream.ts) and the
 * events kept (GET /v1/events). Leaving the view closes the stream.
 */
import type { JSX } from 'preact';
import { href, type ViewProps } from '../../router.js';
import { Header } from '../../ui.js';
import { EventHistory } from './history.js';
import { LiveEvents } from './live.js';
import '../audit/audit.css';
import './events.css';

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
