/**
 * An endpoint's page: its details, its health over 24 hours, its actions and its deliveries,
 * read again every few seconds while it is open.
 */
import type { JSX } from 'preact';
import { call, get } from '../../api.js';
import { count, duration, percent } from '../../format.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { Header, ProblemView, Section, Time, useLoad, usePaged } from '../../ui.js';
import { EndpointActions } from './endpoint-actions.js';
import { DeliveriesSection } from './deliveries.js';
import {
  endpointPath,
  eventsText,
  EVERY_MS,
  PAGE_SIZE,
  stateBadge,
  STATUSES,
  useEvery,
  type Delivery,
  type Endpoint,
  type Health,
} from './shared.js';

export function EndpointView({ id, params }: { id: number; params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const endpoint = useLoad((signal) => call<Endpoint>(endpointPath(id), { signal }), [id]);
  const health = useLoad((signal) => get<Health>(`${endpointPath(id)}/health`, undefined, signal), [id]);
  const statusParam = params.get('status') ?? '';
  const status = STATUSES.some((entry) => entry.value === statusParam) ? statusParam : '';
  const deliveries = usePaged<Delivery>(`${endpointPath(id)}/deliveries`, {
    limit: PAGE_SIZE,
    status: status || undefined,
  });
  const refresh = () => {
    endpoint.reload();
    health.reload();
    deliveries.reload();
  };
  useEvery(refresh, EVERY_MS, [id]);

  const record = endpoint.data?.body;
  if (record === undefined)
    return (
      <>
        <Header title={`Endpoint ${id}`} />
        <p class="crumbs">
          <a href={href('webhooks')}>Webhook endpoints</a>
        </p>
        {endpoint.error ? (
          <ProblemView error={endpoint.error} context={`Could not read endpoint ${id}`} />
        ) : (
          <p class="muted">Loading…</p>
        )}
      </>
    );
  return (
    <>
      <Header title={`Endpoint ${id}`}>
        <button type="button" onClick={refresh}>
          Refresh
        </button>
      </Header>
      <p class="crumbs">
        <a href={href('webhooks')}>Webhook endpoints</a> › Endpoint {id}
      </p>
      <ProblemView error={endpoint.error} context="Could not read it again" />
      <div class="endpoint-top">
        <Section title="Endpoint">
          <dl class="record">
            <dt>URL</dt>
            <dd class="url">{record.url}</dd>
            <dt>Description</dt>
            <dd>{record.description || '—'}</dd>
            <dt>Events</dt>
            <dd>{eventsText(record.events)}</dd>
            <dt>State</dt>
            <dd>
              {stateBadge(record)} {record.disabled_reason ? <span>{record.disabled_reason}</span> : null}
            </dd>
            <dt>Failed attempts in a row</dt>
            <dd>{count(record.failed_attempts)}</dd>
            <dt>Owner</dt>
            <dd>
              {record.owner_caller_id === null ? 'none (its caller was deleted)' : `caller ${record.owner_caller_id}`}
            </dd>
            <dt>Previous secret</dt>
            <dd>
              {record.previous_secret_expires_at && Date.parse(record.previous_secret_expires_at) > Date.now() ? (
                <>
                  still signs beside the current one until <Time at={record.previous_secret_expires_at} />
                </>
              ) : (
                'none in use'
              )}
            </dd>
            <dt>Created</dt>
            <dd>
              <Time at={record.created_at} />
            </dd>
            <dt>Changed</dt>
            <dd>
              <Time at={record.updated_at} />
            </dd>
          </dl>
          {can('webhook-endpoints:update') || can('webhook-endpoints:delete') ? (
            <EndpointActions
              endpoint={record}
              etag={endpoint.data?.etag ?? null}
              onChanged={refresh}
              mayUpdate={can('webhook-endpoints:update')}
              mayDelete={can('webhook-endpoints:delete')}
            />
          ) : null}
        </Section>
        <HealthPanel id={id} health={health.data} error={health.error} />
      </div>
      <DeliveriesSection id={id} status={status} deliveries={deliveries} />
    </>
  );
}

function Stat({
  label,
  value,
  note,
  small,
}: {
  label: string;
  value: JSX.Element | string;
  note?: JSX.Element | string;
  small?: boolean;
}) {
  return (
    <div class="stat">
      <p class="stat-label">{label}</p>
      <p class={small ? 'stat-value stat-small' : 'stat-value'}>{value}</p>
      {note ? <p class="stat-note">{note}</p> : null}
    </div>
  );
}

function HealthPanel({ id, health, error }: { id: number; health: Health | undefined; error: unknown }): JSX.Element {
  return (
    <Section title="Health">
      <ProblemView error={error} context="Could not read its health" />
      {health === undefined ? (
        error ? null : (
          <p class="muted">Loading…</p>
        )
      ) : (
        <>
          <p class="muted">
            Since <Time at={health.window_start} /> (24 hours); pending deliveries however old.
          </p>
          <div class="grid">
            <Stat
              label="Success rate"
              value={percent(health.success_rate)}
              note={
                health.attempts.total === 0
                  ? 'no attempts'
                  : `${count(health.attempts.succeeded)} of ${count(health.attempts.total)} attempts`
              }
            />
            <Stat
              label="Lag"
              value={health.lag_ms === null ? 'none' : duration(health.lag_ms)}
              note={
                health.lag_ms === null
                  ? 'nothing waiting'
                  : `the oldest of ${count(health.deliveries.pending ?? 0)} pending`
              }
            />
            <Stat
              label="Deliveries"
              value={`${count(health.deliveries.succeeded ?? 0)} succeeded`}
              note={`${count(health.deliveries.dead ?? 0)} dead, ${count(health.deliveries.pending ?? 0)} pending`}
            />
            <Stat
              label="Last success"
              small
              value={health.last_success_at ? <Time at={health.last_success_at} /> : 'none'}
            />
          </div>
          <div class="last-failure">
            <h3>Last failure</h3>
            {health.last_failure === null ? (
              <p>None in the window.</p>
            ) : (
              <p>
                <Time at={health.last_failure.at} />:{' '}
                {health.last_failure.error ??
                  (health.last_failure.status_code !== null
                    ? `answered ${health.last_failure.status_code}`
                    : 'failed')}{' '}
                (
                <a href={href('webhooks', id, 'deliveries', health.last_failure.delivery_id)}>
                  delivery #{health.last_failure.delivery_id}
                </a>
                )
              </p>
            )}
          </div>
        </>
      )}
    </Section>
  );
}
