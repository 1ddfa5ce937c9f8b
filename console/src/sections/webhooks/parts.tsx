/**
 * Parts of the endpoint forms and pages: the signing secret shown once, and the choice of event
 * types an endpoint subscribes to.
 */
import type { JSX } from 'preact';
import { get } from '../../api.js';
import { CopyButton, ProblemView, useLoad } from '../../ui.js';
import { PING, type EventType } from './shared.js';

/** The signing secret of a new endpoint, or after a rotation: shown this once. */
export function SecretBox({
  secret,
  children,
}: {
  secret: string;
  children?: JSX.Element | string | null;
}): JSX.Element {
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

/** The event types an endpoint may subscribe to, from the catalogue, as checkboxes by resource. */
export function EventChoice({
  chosen,
  onChange,
}: {
  chosen: string[];
  onChange: (events: string[]) => void;
}): JSX.Element {
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
