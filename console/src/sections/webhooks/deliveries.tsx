/**
 * Deliveries: an endpoint's list of them, by status, and one delivery's page with its attempts,
 * its payload and sending it again.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, call, get } from '../../api.js';
import { count, duration } from '../../format.js';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import {
  Badge,
  Field,
  Header,
  JsonView,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Table,
  Time,
  useAction,
  useLoad,
  type Paged,
} from '../../ui.js';
import {
  answerText,
  endpointPath,
  EVERY_MS,
  statusBadge,
  STATUSES,
  useEvery,
  WebhookProblem,
  type Delivery,
} from './shared.js';

/** An endpoint's deliveries, newest first, chosen by status. */
export function DeliveriesSection({
  id,
  status,
  deliveries,
}: {
  id: number;
  status: string;
  deliveries: Paged<Delivery>;
}): JSX.Element {
  return (
    <Section title="Deliveries">
      <div class="filters">
        <Field label="Status">
          <select
            value={status}
            onChange={(event) => navigate(href('webhooks', id, { status: event.currentTarget.value || undefined }))}
          >
            <option value="">any</option>
            {STATUSES.map((entry) => (
              <option key={entry.value} value={entry.value}>
                {entry.label}
              </option>
            ))}
          </select>
        </Field>
        <p class="muted filters-note">Newest first; read again every {EVERY_MS / 1000} seconds.</p>
      </div>
      <PagedTable
        paged={deliveries}
        caption="Deliveries"
        rowKey={(delivery) => delivery.id}
        empty={status ? `No ${status} deliveries.` : 'No deliveries yet.'}
        columns={[
          {
            label: 'Delivery',
            render: (delivery) => (
              <a href={href('webhooks', id, 'deliveries', delivery.id)}>
                <span class="visually-hidden">Delivery </span>#{delivery.id}
              </a>
            ),
          },
          { label: 'Event type', render: (delivery) => <code>{delivery.event_type}</code> },
          { label: 'Status', render: (delivery) => statusBadge(delivery.status) },
          { label: 'Attempts', numeric: true, render: (delivery) => count(delivery.attempts.length) },
          { label: 'Last answer', optional: true, render: (delivery) => answerText(delivery.attempts.at(-1)) },
          {
            label: 'Next attempt',
            optional: true,
            render: (delivery) => (delivery.next_attempt_at ? <Time at={delivery.next_attempt_at} /> : '—'),
          },
          { label: 'Created', optional: true, render: (delivery) => <Time at={delivery.created_at} /> },
        ]}
      />
    </Section>
  );
}

export function DeliveryView({ endpointId, id }: { endpointId: number; id: number }): JSX.Element {
  const can = useCan();
  const path = `${endpointPath(endpointId)}/deliveries/${id}`;
  const delivery = useLoad((signal) => get<Delivery>(path, undefined, signal), [path]);
  const [said, setSaid] = useState<string | undefined>(undefined);
  const record = delivery.data;
  useEvery(delivery.reload, record?.status === 'pending' ? 2000 : undefined, [path]);
  const retry = useAction(async () => {
    await call<Delivery>(`${path}/retry`, { method: 'POST' });
    setSaid('Sent again: the delivery is pending, on a fresh retry schedule; this page follows it.');
    delivery.reload();
  });
  const mayRead = can('events:read');
  const event = useLoad(
    (signal) =>
      record && mayRead
        ? get<unknown>(`/v1/events/${encodeURIComponent(record.event_id)}`, undefined, signal)
        : Promise.resolve(undefined),
    [record?.event_id, mayRead],
  );
  const crumbs = (
    <p class="crumbs">
      <a href={href('webhooks')}>Webhook endpoints</a> ›{' '}
      <a href={href('webhooks', endpointId)}>Endpoint {endpointId}</a> › Delivery {id}
    </p>
  );
  if (record === undefined)
    return (
      <>
        <Header title={`Delivery ${id}`} />
        {crumbs}
        {delivery.error ? (
          <ProblemView error={delivery.error} context={`Could not read delivery ${id}`} />
        ) : (
          <p class="muted">Loading…</p>
        )}
      </>
    );
  const mayRetry = can('webhook-endpoints:update');
  return (
    <>
      <Header title={`Delivery ${id}`}>
        <button type="button" onClick={delivery.reload}>
          Refresh
        </button>
      </Header>
      {crumbs}
      <Section title="Delivery">
        <dl class="record">
          <dt>Status</dt>
          <dd>{statusBadge(record.status)}</dd>
          <dt>Event type</dt>
          <dd>
            <code>{record.event_type}</code>
          </dd>
          <dt>Event</dt>
          <dd>
            <code>{record.event_id}</code> (the webhook-id header)
          </dd>
          <dt>Resource</dt>
          <dd>{record.resource ?? '—'}</dd>
          <dt>Sequence</dt>
          <dd>{record.sequence ?? '—'}</dd>
          <dt>Next attempt</dt>
          <dd>{record.next_attempt_at ? <Time at={record.next_attempt_at} /> : '—'}</dd>
          <dt>Created</dt>
          <dd>
            <Time at={record.created_at} />
          </dd>
          <dt>Changed</dt>
          <dd>
            <Time at={record.updated_at} />
          </dd>
        </dl>
        {mayRetry ? (
          <div class="actions retry">
            <button
              type="button"
              class={record.status === 'dead' ? 'primary' : undefined}
              disabled={retry.busy || record.status === 'pending'}
              onClick={() => (setSaid(undefined), void retry.run())}
            >
              {retry.busy ? 'Sending…' : 'Send again'}
            </button>
            <span class="muted">
              {record.status === 'pending'
                ? 'Pending: rowi sends it by itself.'
                : record.status === 'dead'
                  ? 'Dead: rowi gave up on it. Once the receiver works, send it again.'
                  : 'It succeeded; sending it again delivers it once more, with the same webhook-id.'}
            </span>
          </div>
        ) : null}
        <WebhookProblem error={retry.error} context="Not sent again" />
        <Notice>{said}</Notice>
      </Section>
      <Section title="Attempts">
        <Table
          caption="Attempts"
          rowKey={(attempt) => attempt.attempted_at + attempt.duration_ms}
          rows={record.attempts.map((attempt, index) => ({ ...attempt, index: index + 1 }))}
          empty={record.status === 'pending' ? 'Not tried yet: it is sent within seconds.' : 'No attempts.'}
          columns={[
            { label: '#', numeric: true, render: (attempt) => attempt.index },
            { label: 'When', render: (attempt) => <Time at={attempt.attempted_at} /> },
            {
              label: 'Status',
              render: (attempt) =>
                attempt.status_code === null ? (
                  <Badge tone="bad">no answer</Badge>
                ) : (
                  <Badge tone={attempt.error === null ? 'good' : 'bad'}>{attempt.status_code}</Badge>
                ),
            },
            { label: 'Took', numeric: true, render: (attempt) => duration(attempt.duration_ms) },
            { label: 'Outcome', render: (attempt) => (attempt.error === null ? 'delivered' : attempt.error) },
          ]}
        />
      </Section>
      <Section title="Payload">
        {!mayRead ? (
          <p>The key you signed in with may not read events (scope events:read), so the payload is not shown.</p>
        ) : event.error instanceof ApiError && event.error.status === 404 ? (
          <p>
            The event is no longer kept (events are pruned after ROWI_EVENTS_RETENTION) or this key may not read it.
          </p>
        ) : (
          <>
            <ProblemView error={event.error} context="Could not read the event" />
            {event.data !== undefined ? (
              <>
                <p class="muted">
                  The event as GET /v1/events/{'{id}'} answers it; the webhook's body is this with its resource and
                  sequence.
                </p>
                <JsonView value={event.data} label={`The payload of event ${record.event_id}`} />
              </>
            ) : event.loading ? (
              <p class="muted">Loading…</p>
            ) : null}
          </>
        )}
      </Section>
    </>
  );
}
