/**
 * The list of webhook endpoints, each with its health over 24 hours, and the form for a new
 * endpoint, whose signing secret is shown once.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, get } from '../../api.js';
import { count, duration, percent } from '../../format.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { Badge, Field, Header, Notice, PagedTable, Section, Time, useAction, useLoad, usePaged } from '../../ui.js';
import { EventChoice, SecretBox } from './parts.js';
import {
  endpointPath,
  eventsText,
  PAGE_SIZE,
  stateBadge,
  takeFlash,
  WebhookProblem,
  type Endpoint,
  type EndpointWithSecret,
  type Health,
} from './shared.js';

export function EndpointsView(): JSX.Element {
  const can = useCan();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<EndpointWithSecret | undefined>(undefined);
  const [message] = useState(takeFlash);
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
