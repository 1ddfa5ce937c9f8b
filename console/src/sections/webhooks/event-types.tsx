/**
 * The catalogue of event types: each with its resource, its description and an example, chosen by
 * resource.
 */
import type { JSX } from 'preact';
import { get } from '../../api.js';
import { count } from '../../format.js';
import { href, navigate } from '../../router.js';
import { Field, Header, JsonView, ProblemView, useLoad } from '../../ui.js';
import type { ViewProps } from '../../router.js';
import type { EventType } from './shared.js';

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
