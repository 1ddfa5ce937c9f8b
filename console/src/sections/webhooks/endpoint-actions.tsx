/**
 * What may be done to an endpoint: enable or disable it, send a test event and follow it, rotate
 * its secret, change its URL, events and description, delete it.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, get } from '../../api.js';
import { dateTime, duration } from '../../format.js';
import { href, navigate } from '../../router.js';
import { ConfirmButton, Field, Notice, ProblemView, Time, useAction } from '../../ui.js';
import { EventChoice, SecretBox } from './parts.js';
import {
  endpointPath,
  setFlash,
  useEvery,
  WebhookProblem,
  type Delivery,
  type Endpoint,
  type EndpointWithSecret,
} from './shared.js';

export function EndpointActions({
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
    setFlash(`Endpoint ${endpoint.id} (${endpoint.url}) and its deliveries were deleted.`);
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
