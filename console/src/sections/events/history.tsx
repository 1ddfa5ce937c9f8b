/** The events rowi keeps (GET /v1/events), by type, paged. */
import type { JSX } from 'preact';
import { href, navigate } from '../../router.js';
import { JsonView, PagedTable, Section, Time, usePaged } from '../../ui.js';
import { consoleLinkOf, useEventTypes } from './shared.js';
import type { RowiEvent } from './stream.js';

export function EventHistory({ params }: { params: URLSearchParams }): JSX.Element {
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
