/** One request of the audit trail: what was asked and answered, and links to the related. */
import type { JSX } from 'preact';
import { ApiError, get, type Page } from '../../api.js';
import { duration } from '../../format.js';
import { href } from '../../router.js';
import { CopyButton, Header, ProblemView, Section, Time, useLoad } from '../../ui.js';
import { routeQuery, StatusBadge, type AuditEvent, type Filters } from './shared.js';

/** The console's sections that show a resource's record, by the resource's name. */
const RECORD_SECTIONS: Record<string, string> = {
  users: 'users',
  items: 'items',
  stock: 'items',
  orders: 'orders',
  callers: 'callers',
  'webhook-endpoints': 'webhooks',
};

export function AuditDetails({ id, filters }: { id: string; filters: Filters }): JSX.Element {
  const back = routeQuery(filters);
  const loaded = useLoad(
    async (signal) => {
      if (!/^[1-9][0-9]{0,15}$/.test(id))
        throw new ApiError({ type: '/problems/not-found', title: 'Not found', status: 404 });
      const page = await get<Page<AuditEvent>>('/v1/audit-events', { id }, signal);
      const event = page.data[0];
      if (event === undefined)
        throw new ApiError({
          type: '/problems/not-found',
          title: 'Not found',
          status: 404,
          detail: `No request ${id} in the audit trail (it may have been pruned after its retention).`,
        });
      return event;
    },
    [id],
  );
  const event = loaded.data;
  const section = event?.resource ? RECORD_SECTIONS[event.resource] : undefined;
  const recordLink =
    event && section && event.record_id !== null && /^[1-9][0-9]*$/.test(event.record_id)
      ? href(section, event.record_id)
      : undefined;
  return (
    <>
      <Header title={`Request ${id}`}>
        <a href={href('audit', back)}>Back to the trail</a>
      </Header>
      <ProblemView error={loaded.error} context="Could not read this request" />
      {loaded.loading && event === undefined ? <p aria-busy="true">Loading…</p> : null}
      {event ? (
        <>
          <Section title="What was asked, and the answer">
            <dl class="record">
              <dt>Time</dt>
              <dd>
                <Time at={event.at} /> <span class="audit-muted">({event.at})</span>
              </dd>
              <dt>Method</dt>
              <dd>
                <code>{event.method}</code>
              </dd>
              <dt>Path</dt>
              <dd>
                <code>{event.path}</code>
              </dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge status={event.status} />
              </dd>
              <dt>Duration</dt>
              <dd>{duration(event.duration_ms)}</dd>
              <dt>Resource</dt>
              <dd>{event.resource ?? '—'}</dd>
              <dt>Record id</dt>
              <dd>{event.record_id ?? '—'}</dd>
              <dt>Action</dt>
              <dd>{event.action ?? '—'}</dd>
              <dt>Caller</dt>
              <dd>
                {event.caller_name ?? 'none'}
                {event.caller_id !== null ? ` (#${event.caller_id})` : ''}
              </dd>
              <dt>Credential</dt>
              <dd>{event.credential ?? '—'}</dd>
              <dt>Acting for user</dt>
              <dd>{event.user_id ?? '—'}</dd>
              <dt>Client address</dt>
              <dd>{event.client_ip ?? '—'}</dd>
              <dt>Request id</dt>
              <dd>
                <code>{event.request_id}</code> <CopyButton text={event.request_id} label="Copy request id" />
              </dd>
              <dt>Audit event id</dt>
              <dd>{event.id}</dd>
            </dl>
          </Section>
          <Section title="Related">
            <ul class="audit-related">
              {event.resource !== null && event.record_id !== null ? (
                <li>
                  <a href={href('audit', { resource: event.resource, record_id: event.record_id })}>
                    Every request on this record
                  </a>
                </li>
              ) : null}
              {event.caller_id !== null ? (
                <li>
                  <a href={href('audit', { caller_id: event.caller_id })}>Every request of this caller</a>
                </li>
              ) : null}
              {recordLink ? (
                <li>
                  <a href={recordLink}>Open the record</a>
                </li>
              ) : null}
            </ul>
          </Section>
        </>
      ) : null}
    </>
  );
}
