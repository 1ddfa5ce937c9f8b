/** The audit trail's list: the filters, the requests they match, paged. */
import type { JSX } from 'preact';
import { duration } from '../../format.js';
import { href } from '../../router.js';
import { Header, PagedTable, Section, Time, usePaged, type Column } from '../../ui.js';
import { AuditFilters } from './filters.js';
import { routeQuery, StatusBadge, type AuditEvent, type Filters } from './shared.js';

const PAGE_SIZE = 50;

export function AuditList({ filters }: { filters: Filters }): JSX.Element {
  const paged = usePaged<AuditEvent>('/v1/audit-events', { ...filters, limit: PAGE_SIZE });
  const back = routeQuery(filters);
  const columns: Column<AuditEvent>[] = [
    {
      label: 'Time',
      render: (event) => (
        <a href={href('audit', event.id, back)}>
          <Time at={event.at} />
          <span class="visually-hidden">, details of request {event.id}</span>
        </a>
      ),
    },
    {
      label: 'Caller',
      render: (event) =>
        event.caller_name === null ? (
          <span class="audit-muted">none</span>
        ) : event.caller_id !== null ? (
          <a href={href('audit', { ...back, caller_id: event.caller_id })} title="Only the requests of this caller">
            {event.caller_name}
          </a>
        ) : (
          event.caller_name
        ),
    },
    { label: 'Method', render: (event) => <code>{event.method}</code> },
    { label: 'Path', render: (event) => <code class="audit-path">{event.path}</code> },
    { label: 'Status', render: (event) => <StatusBadge status={event.status} /> },
    { label: 'Duration', numeric: true, optional: true, render: (event) => duration(event.duration_ms) },
    { label: 'Request id', optional: true, render: (event) => <code class="audit-id">{event.request_id}</code> },
  ];
  const described = describe(filters, paged.rows.find((event) => event.caller_name !== null)?.caller_name);
  return (
    <>
      <Header title="Audit trail" />
      <p class="stat-note">
        Every request to rowi, allowed or refused, newest first. The trail is written about once a second, so the last
        second's requests may not be listed yet.
      </p>
      <AuditFilters key={JSON.stringify(filters)} filters={filters} />
      <Section title={described === '' ? 'Requests' : `Requests ${described}`}>
        <PagedTable
          paged={paged}
          caption="Audit events"
          columns={columns}
          rowKey={(event) => event.id}
          empty={Object.keys(filters).length > 0 ? 'No request matches these filters.' : 'No request recorded yet.'}
        />
      </Section>
    </>
  );
}

/** The filters in words, for the section's title: "of caller 2, PATCH, on orders 12". */
function describe(filters: Filters, callerName?: string | null): string {
  const words: string[] = [];
  if (filters.method) words.push(filters.method.toUpperCase());
  if (filters.action) words.push(`(${filters.action})`);
  if (filters.resource) words.push(`on ${filters.resource}${filters.record_id ? ` ${filters.record_id}` : ''}`);
  else if (filters.record_id) words.push(`on record ${filters.record_id}`);
  if (filters.path) words.push(`to ${filters.path}`);
  if (filters.caller_id)
    words.push(`of ${callerName ? `${callerName} (caller ${filters.caller_id})` : `caller ${filters.caller_id}`}`);
  if (filters.user_id) words.push(`for user ${filters.user_id}`);
  if (filters.status) words.push(`answered ${filters.status}`);
  if (filters.status_class) words.push(`answered ${filters.status_class}`);
  return words.join(' ');
}
