/**
 * Webhooks: the endpoints rowi sends events to, how each fares (success rate, lag, the last
 * failure), its deliveries and their attempts, sending one again, a test event, the signing
 * secret (shown once) and its rotation; and the catalogue of event types with an example each.
 * Every figure comes from /v1 with the signed-in key; every record string is rendered as text.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, get } from '../api.js';
import { count, dateTime, duration, percent } from '../format.js';
import { useCan } from '../identity.js';
import { href, navigate } from '../router.js';
import {
  Badge,
  ConfirmButton,
  CopyButton,
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
  usePaged,
} from '../ui.js';
import type { ViewProps } from '../router.js';
import './webhooks.css';

interface Endpoint {
  id: number;
  url: string;
  owner_caller_id: number | null;
  description: string;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  failed_attempts: number;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}
type EndpointWithSecret = Endpoint & { secret: string };

interface Attempt {
  attempted_at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}
type DeliveryStatus = 'pending' | 'succeeded' | 'dead';
interface Delivery {
  id: number;
  endpoint_id: number;
  event_id: string;
  event_type: string;
  resource: string | null;
  sequence: number | null;
  status: DeliveryStatus;
  next_attempt_at: string | null;
  attempts: Attempt[];
  created_at: string;
  updated_at: string;
}

interface Health {
  endpoint_id: number;
  window_start: string;
  deliveries: Record<string, number>;
  attempts: { total: number; succeeded: number; failed: number };
  success_rate: number | null;
  lag_ms: number | null;
  last_success_at: string | null;
  last_failure: { at: string; delivery_id: number; status_code: number | null; error: string | null } | null;
}

interface EventType {
  type: string;
  resource: string;
  description: string;
  example: unknown;
}

/** The statuses a delivery has (GET …/deliveries?status=), in the order a person reads them. */
const STATUSES: { value: DeliveryStatus; label: string; tone: 'good' | 'bad' | 'warn' }[] = [
  { value: 'pending', label: 'pending', tone: 'warn' },
  { value: 'succeeded', label: 'succeeded', tone: 'good' },
  { value: 'dead', label: 'dead', tone: 'bad' },
];
/** A test event, sent by …/ping to one endpoint only: not a type an endpoint subscribes to. */
const PING = 'webhook.ping';
/** How often an endpoint's page reads its health and deliveries again while it is open. */
const EVERY_MS = 5000;
const PAGE_SIZE = 20;

const endpointPath = (id: number | string) => `/v1/webhook-endpoints/${encodeURIComponent(String(id))}`;

/** A message for the next view shown (after a deletion, the list says so). */
let flash: string | undefined;

export function WebhooksView({ parts, params }: ViewProps): JSX.Element {
  const [id, sub, deliveryId] = parts;
  if (id === undefined) return <EndpointsView />;
  if (!/^[1-9][0-9]*$/.test(id)) return <NotHere what={`Endpoint “${id}”`} />;
  if (sub === undefined) return <EndpointView id={Number(id)} params={params} />;
  if (sub === 'deliveries' && deliveryId !== undefined && /^[1-9][0-9]*$/.test(deliveryId))
    return <DeliveryView endpointId={Number(id)} id={Number(deliveryId)} />;
  return <NotHere what="This page" />;
}

function NotHere({ what }: { what: string }): JSX.Element {
  return (
    <>
      <Header title="Not here" />
      <p>
        {what} is not a place in the console. <a href={href('webhooks')}>Go to the webhook endpoints</a>.
      </p>
    </>
  );
}

/** Runs `tick` every `ms` while the tab is shown (none when `ms` is undefined). */
function useEvery(tick: () => void, ms: number | undefined, deps: unknown[] = []): void {
  useEffect(() => {
    if (ms === undefined) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') tick();
    }, ms);
    return () => clearInterval(timer);
  }, [ms, ...deps]);
}

/** What the problems of this section mean, beyond rowi's own words. */
const WEBHOOK_PROBLEMS: Record<string, string> = {
  'delivery-pending':
    'This delivery is still pending: rowi sends it again by itself on its retry schedule. It can be sent again by hand once it has succeeded or gone dead.',
  'endpoint-disabled': 'The endpoint is disabled: enable it first, then try again.',
  'rotation-in-progress':
    'The secret was rotated recently and the previous one still signs beside the new one. It can be rotated again when that overlap ends.',
  'webhook-url-refused':
    'rowi sends only to https addresses on the public internet; loopback, private and link-local addresses are refused unless the deployment lists their hosts in ROWI_WEBHOOK_ALLOW_HOSTS.',
  'webhook-endpoint-forbidden':
    'The key you signed in with may not read every kind of record this endpoint sends, so it may not change it.',
};

/** A problem, explained with what it means for webhooks too. */
function WebhookProblem({ error, context }: { error: unknown; context: string }): JSX.Element | null {
  if (error === undefined || error === null) return null;
  const kind = error instanceof ApiError ? error.kind : '';
  const required =
    error instanceof ApiError && Array.isArray(error.problem.required_scopes)
      ? (error.problem.required_scopes as unknown[]).map(String)
      : [];
  return (
    <div class="webhook-problem">
      <ProblemView error={error} context={context} />
      {WEBHOOK_PROBLEMS[kind] ? <p class="problem-more">{WEBHOOK_PROBLEMS[kind]}</p> : null}
      {required.length > 0 ? <p class="problem-more">Scopes needed: {required.join(', ')}</p> : null}
    </div>
  );
}

function statusBadge(status: string): JSX.Element {
  const known = STATUSES.find((entry) => entry.value === status);
  return <Badge tone={known?.tone ?? 'neutral'}>{known?.label ?? status}</Badge>;
}

function stateBadge(endpoint: Endpoint): JSX.Element {
  return endpoint.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="bad">disabled</Badge>;
}

function eventsText(events: string[]): string {
  return events.includes('*') ? 'every type (*)' : events.join(', ');
}

/** What an attempt got: the receiver's status, or why none came. */
function answerText(attempt: Attempt | undefined): string {
  if (attempt === undefined) return 'not tried yet';
  if (attempt.error === null) return `answered ${attempt.status_code ?? '?'}`;
  return attempt.error;
}

// ————— The endpoints —————

function EndpointsView(): JSX.Element {
  const can = useCan();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<EndpointWithSecret | undefined>(undefined);
  const [message] = useState(() => {
    const text = flash;
    flash = undefined;
    return text;
  });
  const paged = usePaged<Endpoint>('/v1/webhook-endpoints', { limit: PAGE_SIZE });
  const mayCreate = can('webhook-endpoints:create');
  return (
    <>
      <Header title="Webhook endpoints">
        {mayCreate && !creating ? (
          <button
            type="button"
            class="primary"
            onClick={() => {
              setCreated(undefined);
              setCreating(true);
            }}
          >
            New endpoint
          </button>
        ) : null}
        <a class="button" href={href('event-types')}>
          Event types
        </a>
      </Header>
      <p class="lead">
        rowi POSTs each event to every enabled endpoint subscribed to its type, signed with the endpoint's secret
        (Standard Webhooks), retrying failures. Health is counted over the last 24 hours.
      </p>
      <Notice>{message}</Notice>
      {created ? <CreatedSecret endpoint={created} onDone={() => setCreated(undefined)} /> : null}
      {creating ? (
        <CreateEndpoint
          onCancel={() => setCreating(false)}
          onCreated={(endpoint) => {
            setCreating(false);
            setCreated(endpoint);
            paged.reload();
          }}
        />
      ) : null}
      <PagedTable
        paged={paged}
        caption="Webhook endpoints"
        rowKey={(endpoint) => endpoint.id}
        empty={mayCreate ? 'No endpoints yet: create one with New endpoint.' : 'No endpoints yet.'}
        columns={[
          {
            label: 'Endpoint',
            render: (endpoint) => (
              <div class="endpoint-cell">
                <a href={href('webhooks', endpoint.id)}>
                  <span class="visually-hidden">Endpoint {endpoint.id}: </span>
                  <span class="url">{endpoint.url}</span>
                </a>
                {endpoint.description ? <span class="muted">{endpoint.description}</span> : null}
              </div>
            ),
          },
          { label: 'Events', optional: true, render: (endpoint) => eventsText(endpoint.events) },
          {
            label: 'State',
            render: (endpoint) => (
              <div class="state-cell">
                {stateBadge(endpoint)}
                {endpoint.disabled_reason ? <span class="muted">{endpoint.disabled_reason}</span> : null}
              </div>
            ),
          },
          { label: 'Health, 24 h', render: (endpoint) => <HealthSummary id={endpoint.id} /> },
        ]}
      />
    </>
  );
}

/** One line of an endpoint's health, for the list. */
function HealthSummary({ id }: { id: number }): JSX.Element {
  const health = useLoad((signal) => get<Health>(`${endpointPath(id)}/health`, undefined, signal), [id]);
  if (health.error)
    return <span class="muted">not known ({health.error instanceof ApiError ? health.error.status : 'failed'})</span>;
  const data = health.data;
  if (data === undefined) return <span class="muted">Loading…</span>;
  const dead = data.deliveries.dead ?? 0;
  const pending = data.deliveries.pending ?? 0;
  return (
    <div class="health-cell">
      <span>
        {data.success_rate === null ? 'no attempts' : `${percent(data.success_rate)} succeeded`}
        {data.lag_ms !== null ? `, ${count(pending)} waiting (${duration(data.lag_ms)})` : ''}
      </span>
      {dead > 0 ? <Badge tone="bad">{count(dead)} dead</Badge> : null}
      {data.last_failure ? (
        <span class="muted">
          last failure <Time at={data.last_failure.at} />
        </span>
      ) : null}
    </div>
  );
}

/** The signing secret of a new endpoint, or after a rotation: shown this once. */
function SecretBox({ secret, children }: { secret: string; children?: JSX.Element | string | null }): JSX.Element {
  return (
    <div class="secret-panel">
      <p>
        <strong>The signing secret is shown only now.</strong> Copy it into the receiver's configuration: rowi will not
        show it again (rotate it to get a new one).
      </p>
      <div class="secret" role="group" aria-label="Signing secret">
        <code>{secret}</code>
        <CopyButton text={secret} label="Copy the secret" />
      </div>
      {children ? <p>{children}</p> : null}
    </div>
  );
}

function CreatedSecret({ endpoint, onDone }: { endpoint: EndpointWithSecret; onDone: () => void }): JSX.Element {
  return (
    <Section title={`Endpoint ${endpoint.id} created`}>
      <Notice>
        Endpoint {endpoint.id} created for <span class="url">{endpoint.url}</span>
        {endpoint.enabled ? '; it is sent events from now on.' : ', disabled.'}
      </Notice>
      <SecretBox secret={endpoint.secret} />
      <p class="actions">
        <a class="button" href={href('webhooks', endpoint.id)}>
          Open endpoint {endpoint.id}
        </a>
        <button type="button" onClick={onDone}>
          I have copied it
        </button>
      </p>
    </Section>
  );
}

/** The event types an endpoint may subscribe to, from the catalogue, as checkboxes by resource. */
function EventChoice({ chosen, onChange }: { chosen: string[]; onChange: (events: string[]) => void }): JSX.Element {
  const catalogue = useLoad((signal) => get<{ data: EventType[] }>('/v1/event-types', undefined, signal), []);
  const all = chosen.includes('*');
  const types = (catalogue.data?.data ?? []).filter((type) => type.type !== PING);
  const resources = [...new Set(types.map((type) => type.resource))];
  const toggle = (type: string, on: boolean) =>
    onChange(on ? [...chosen.filter((name) => name !== type), type] : chosen.filter((name) => name !== type));
  return (
    <fieldset class="event-choice">
      <legend>Events</legend>
      <label class="check">
        <input type="checkbox" checked={all} onChange={(event) => onChange(event.currentTarget.checked ? ['*'] : [])} />{' '}
        Every type the owner may read (*)
      </label>
      <ProblemView error={catalogue.error} context="Could not read the event types" />
      {catalogue.loading && catalogue.data === undefined ? <p class="muted">Loading the event types…</p> : null}
      {all ? null : (
        <div class="event-groups">
          {resources.map((resource) => (
            <fieldset key={resource} class="event-group">
              <legend>{resource}</legend>
              <div class="checks">
                {types
                  .filter((type) => type.resource === resource)
                  .map((type) => (
                    <label key={type.type} class="check" title={type.description}>
                      <input
                        type="checkbox"
                        checked={chosen.includes(type.type)}
                        onChange={(event) => toggle(type.type, event.currentTarget.checked)}
                      />{' '}
                      <code>{type.type}</code>
                    </label>
                  ))}
              </div>
            </fieldset>
          ))}
        </div>
      )}
    </fieldset>
  );
}

function CreateEndpoint({
  onCancel,
  onCreated,
}: {
  onCancel: () => void;
  onCreated: (endpoint: EndpointWithSecret) => void;
}): JSX.Element {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const [enabled, setEnabled] = useState(true);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);
  const action = useAction(async () => {
    const answer = await call<EndpointWithSecret>('/v1/webhook-endpoints', {
      method: 'POST',
      body: { url: url.trim(), events, description, enabled },
    });
    onCreated(answer.body);
  });
  return (
    <Section title="New endpoint">
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          void action.run();
        }}
      >
        <Field
          label="URL"
          hint="Where rowi POSTs the events: https, on a public address (or a host the deployment allows)."
        >
          <input
            ref={first}
            type="url"
            name="url"
            required
            spellcheck={false}
            autocomplete="off"
            placeholder="https://hooks.example.com/rowi"
            value={url}
            onInput={(event) => setUrl(event.currentTarget.value)}
          />
        </Field>
        <Field label="Description" hint="What it is for; up to 500 characters.">
          <input
            name="description"
            maxLength={500}
            value={description}
            onInput={(event) => setDescription(event.currentTarget.value)}
          />
        </Field>
        <EventChoice chosen={events} onChange={setEvents} />
        <label class="check">
          <input type="checkbox" checked={enabled} onChange={(event) => setEnabled(event.currentTarget.checked)} />{' '}
          Enabled: send events from now on
        </label>
        <WebhookProblem error={action.error} context="The endpoint was not created" />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy || events.length === 0}>
            {action.busy ? 'Creating…' : 'Create endpoint'}
          </button>
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
          {events.length === 0 ? <span class="muted">Choose at least one event type.</span> : null}
        </div>
      </form>
    </Section>
  );
}

// ————— One endpoint —————

function EndpointView({ id, params }: { id: number; params: URLSearchParams }): JSX.Element {
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

function EndpointActions({
  endpoint,
  etag,
  onChanged,
  mayUpdate,
  mayDelete,
}: {
  endpoint: Endpoint;
  etag: string | null;
  onChanged: () => void;
  mayUpdate: boolean;
  mayDelete: boolean;
}): JSX.Element {
  const [said, setSaid] = useState<string | undefined>(undefined);
  const [rotated, setRotated] = useState<EndpointWithSecret | undefined>(undefined);
  const [ping, setPing] = useState<Delivery | undefined>(undefined);
  const [editing, setEditing] = useState(false);
  const path = endpointPath(endpoint.id);

  const toggle = useAction(async (enabled: boolean) => {
    await call(path, { method: 'PATCH', body: { enabled }, ifMatch: etag });
    setSaid(enabled ? 'Enabled: events are sent to it again from now on.' : 'Disabled: no events are sent to it.');
    onChanged();
  });
  const rotate = useAction(async () => {
    const answer = await call<EndpointWithSecret>(`${path}/rotate-secret`, { method: 'POST', ifMatch: etag });
    setSaid(undefined);
    setRotated(answer.body);
    onChanged();
  });
  const sendPing = useAction(async () => {
    const answer = await call<Delivery>(`${path}/ping`, { method: 'POST' });
    setSaid(undefined);
    setPing(answer.body);
    onChanged();
  });
  const remove = useAction(async () => {
    await call(path, { method: 'DELETE', ifMatch: etag });
    flash = `Endpoint ${endpoint.id} (${endpoint.url}) and its deliveries were deleted.`;
    navigate(href('webhooks'));
  });
  const error = toggle.error ?? rotate.error ?? sendPing.error ?? remove.error;
  const overlapping =
    endpoint.previous_secret_expires_at !== null && Date.parse(endpoint.previous_secret_expires_at) > Date.now();
  const clearAll = () => {
    toggle.clear();
    rotate.clear();
    sendPing.clear();
    remove.clear();
  };

  return (
    <section class="endpoint-actions" aria-label="Actions">
      <h3 class="visually-hidden">Actions</h3>
      <div class="actions">
        {mayUpdate ? (
          endpoint.enabled ? (
            <ConfirmButton
              key="disable"
              label="Disable"
              confirm="No events are sent to it while disabled, and those in between are not sent later."
              disabled={toggle.busy}
              onConfirm={() => (clearAll(), void toggle.run(false))}
            />
          ) : (
            <button
              key="enable"
              type="button"
              disabled={toggle.busy}
              onClick={() => (clearAll(), void toggle.run(true))}
            >
              Enable
            </button>
          )
        ) : null}
        {mayUpdate ? (
          <button
            type="button"
            disabled={sendPing.busy || !endpoint.enabled}
            onClick={() => (clearAll(), void sendPing.run())}
          >
            {sendPing.busy ? 'Sending…' : 'Send a test event'}
          </button>
        ) : null}
        {mayUpdate ? (
          <ConfirmButton
            key="rotate"
            label="Rotate the secret"
            confirm="A new secret; the current one keeps signing beside it for a while."
            danger={false}
            disabled={rotate.busy || overlapping}
            onConfirm={() => (clearAll(), void rotate.run())}
          />
        ) : null}
        {mayUpdate && !editing ? (
          <button type="button" onClick={() => setEditing(true)}>
            Change URL, events, description
          </button>
        ) : null}
        {mayDelete ? (
          <ConfirmButton
            key="Delete"
            label="Delete"
            confirm="Delete this endpoint and all its deliveries?"
            disabled={remove.busy}
            onConfirm={() => (clearAll(), void remove.run())}
          />
        ) : null}
      </div>
      {!endpoint.enabled && mayUpdate ? <p class="muted">A test event is sent only to an enabled endpoint.</p> : null}
      {overlapping && mayUpdate && rotated === undefined ? (
        <p class="muted">
          The secret can be rotated again once the previous one stops signing (
          <Time at={endpoint.previous_secret_expires_at} />
          ).
        </p>
      ) : null}
      <WebhookProblem error={error} context="Not done" />
      <Notice>{said}</Notice>
      {rotated ? (
        <SecretBox secret={rotated.secret}>
          {rotated.previous_secret_expires_at ? (
            <>
              The previous secret keeps signing beside it until {dateTime(rotated.previous_secret_expires_at)} (
              {duration(Date.parse(rotated.previous_secret_expires_at) - Date.now())} from now): switch the receiver
              before then.
            </>
          ) : null}
        </SecretBox>
      ) : null}
      {ping ? <PingResult endpointId={endpoint.id} sent={ping} /> : null}
      {editing ? (
        <EditEndpoint
          endpoint={endpoint}
          etag={etag}
          onDone={(changed) => {
            setEditing(false);
            if (changed) {
              setSaid('Saved.');
              onChanged();
            }
          }}
        />
      ) : null}
    </section>
  );
}

/** A test event sent: its delivery, read again until the receiver has answered. */
function PingResult({ endpointId, sent }: { endpointId: number; sent: Delivery }): JSX.Element {
  const [delivery, setDelivery] = useState(sent);
  const [error, setError] = useState<unknown>(undefined);
  const polls = useRef(0);
  const waiting = delivery.status === 'pending' && delivery.attempts.length === 0 && polls.current < 30;
  useEvery(
    () => {
      polls.current += 1;
      get<Delivery>(`${endpointPath(endpointId)}/deliveries/${sent.id}`).then(setDelivery, setError);
    },
    waiting ? 1000 : undefined,
    [sent.id],
  );
  const last = delivery.attempts.at(-1);
  return (
    <div class="ping-result" role="status">
      <p>
        Test event sent as <a href={href('webhooks', endpointId, 'deliveries', delivery.id)}>delivery #{delivery.id}</a>{' '}
        (<code>{delivery.event_type}</code>).{' '}
        {last === undefined
          ? 'Waiting for the receiver…'
          : last.error === null
            ? `The receiver answered ${last.status_code ?? '?'} in ${duration(last.duration_ms)}.`
            : `It failed: ${last.error} (after ${duration(last.duration_ms)})${delivery.status === 'pending' ? '; rowi retries it.' : '.'}`}
      </p>
      <ProblemView error={error} context="Could not follow the test event" />
    </div>
  );
}

function EditEndpoint({
  endpoint,
  etag,
  onDone,
}: {
  endpoint: Endpoint;
  etag: string | null;
  onDone: (changed: boolean) => void;
}): JSX.Element {
  // The version the change is made to: a change made meanwhile elsewhere is refused (412), never overwritten.
  const [version] = useState(etag);
  const [url, setUrl] = useState(endpoint.url);
  const [description, setDescription] = useState(endpoint.description);
  const [events, setEvents] = useState(endpoint.events);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);
  const save = useAction(async () => {
    const body: Record<string, unknown> = {};
    if (url.trim() !== endpoint.url) body.url = url.trim();
    if (description !== endpoint.description) body.description = description;
    if (JSON.stringify(events) !== JSON.stringify(endpoint.events)) body.events = events;
    if (Object.keys(body).length === 0) return onDone(false);
    await call(endpointPath(endpoint.id), { method: 'PATCH', body, ifMatch: version });
    onDone(true);
  });
  return (
    <form
      class="form edit-endpoint"
      aria-label="Change the endpoint"
      onSubmit={(event) => {
        event.preventDefault();
        void save.run();
      }}
    >
      <h3>Change the endpoint</h3>
      <Field label="URL" hint="Only the endpoint's owner may change it.">
        <input
          ref={first}
          type="url"
          required
          spellcheck={false}
          value={url}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
      </Field>
      <Field label="Description">
        <input maxLength={500} value={description} onInput={(event) => setDescription(event.currentTarget.value)} />
      </Field>
      <EventChoice chosen={events} onChange={setEvents} />
      <WebhookProblem error={save.error} context="Not saved" />
      <div class="actions">
        <button type="submit" class="primary" disabled={save.busy || events.length === 0}>
          {save.busy ? 'Saving…' : 'Save'}
        </button>
        <button type="button" onClick={() => onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

// ————— One delivery —————

function DeliveryView({ endpointId, id }: { endpointId: number; id: number }): JSX.Element {
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

// ————— The event types —————

export function EventTypesView({ params }: ViewProps): JSX.Element {
  const catalogue = useLoad((signal) => get<{ data: EventType[] }>('/v1/event-types', undefined, signal), []);
  const types = catalogue.data?.data ?? [];
  const resources = [...new Set(types.map((type) => type.resource))];
  const chosen = params.get('resource') ?? '';
  const shown = chosen ? types.filter((type) => type.resource === chosen) : types;
  return (
    <>
      <Header title="Event types" />
      <p class="lead">
        Every type of event rowi writes: on GET /v1/events and the live stream, and POSTed to the webhook endpoints
        subscribed to it. A webhook's body is the event as shown, with its <code>resource</code> and{' '}
        <code>sequence</code>; it is signed in the webhook-signature header (Standard Webhooks).
      </p>
      <ProblemView error={catalogue.error} context="Could not read the event types" />
      {catalogue.loading && catalogue.data === undefined ? <p class="muted">Loading…</p> : null}
      {types.length > 0 ? (
        <div class="filters">
          <Field label="Resource">
            <select
              value={chosen}
              onChange={(event) => navigate(href('event-types', { resource: event.currentTarget.value || undefined }))}
            >
              <option value="">every resource ({count(types.length)} types)</option>
              {resources.map((resource) => (
                <option key={resource} value={resource}>
                  {resource}
                </option>
              ))}
            </select>
          </Field>
        </div>
      ) : null}
      <div class="event-types">
        {shown.map((type) => (
          <section key={type.type} class="panel event-type" aria-labelledby={`event-type-${type.type}`}>
            <h2 id={`event-type-${type.type}`}>
              <code>{type.type}</code>
            </h2>
            <p>{type.description}</p>
            <p class="muted">
              Resource: {type.resource}; seen by keys with <code>{type.resource}:read</code>.
            </p>
            <JsonView value={type.example} label={`An example of ${type.type}`} />
          </section>
        ))}
      </div>
    </>
  );
}
