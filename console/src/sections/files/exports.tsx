/** The exports view: a collection's list downloaded with Accept text/csv or application/x-ndjson. */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { download } from '../../api.js';
import { bytes } from '../../format.js';
import { useCan } from '../../identity.js';
import { Field, Header, Notice, ProblemView, Section, useAction } from '../../ui.js';
import type { ViewProps } from '../../router.js';
import './files.css';

interface Exportable {
  value: string;
  label: string;
  path: string;
  scope: string;
  /** The names of its "created after/before" filters, when it has them. */
  range?: [string, string];
  statuses?: string[];
}

const EXPORTABLE: Exportable[] = [
  {
    value: 'users',
    label: 'Users',
    path: '/v1/users',
    scope: 'users:read',
    range: ['created_after', 'created_before'],
  },
  {
    value: 'items',
    label: 'Items',
    path: '/v1/items',
    scope: 'items:read',
    range: ['created_after', 'created_before'],
  },
  { value: 'stock', label: 'Stock levels', path: '/v1/items/stock', scope: 'stock:read' },
  {
    value: 'orders',
    label: 'Orders (a row per line in CSV)',
    path: '/v1/orders',
    scope: 'orders:read',
    range: ['created_after', 'created_before'],
    statuses: ['placed', 'paid', 'shipped', 'delivered', 'cancelled'],
  },
  {
    value: 'audit-events',
    label: 'Audit events',
    path: '/v1/audit-events',
    scope: 'audit-events:read',
    range: ['after', 'before'],
  },
  {
    value: 'events',
    label: 'Events',
    path: '/v1/events',
    scope: 'events:read',
    range: ['created_after', 'created_before'],
  },
];

/** A `datetime-local` value (the operator's time) as an instant, RFC 3339. */
function instant(local: string): string | undefined {
  if (local === '') return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

export function ExportsView(_props: ViewProps): JSX.Element {
  const can = useCan();
  const allowed = EXPORTABLE.filter((entry) => can(entry.scope));
  const [which, setWhich] = useState(allowed[0]?.value ?? 'users');
  const [format, setFormat] = useState<'csv' | 'ndjson'>('csv');
  const [after, setAfter] = useState('');
  const [before, setBefore] = useState('');
  const [status, setStatus] = useState('');
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const chosen = allowed.find((entry) => entry.value === which) ?? allowed[0];
  const save = useAction(async () => {
    if (chosen === undefined) return;
    setSaved(undefined);
    const day = new Date().toISOString().slice(0, 10);
    const name = `${chosen.value}-${day}.${format}`;
    const query: Record<string, string | undefined> = {};
    if (chosen.range) {
      query[chosen.range[0]] = instant(after);
      query[chosen.range[1]] = instant(before);
    }
    if (chosen.statuses) query.status = status || undefined;
    const size = await download(chosen.path, format === 'csv' ? 'text/csv' : 'application/x-ndjson', name, query);
    setSaved(`Saved ${name} (${bytes(size)}).`);
  });
  return (
    <>
      <Header title="Exports" />
      <p class="lede">
        Download every record of a collection that the filters select (not a page) as CSV or NDJSON, as the API answers
        a list with <code>Accept: text/csv</code> or <code>application/x-ndjson</code>.
      </p>
      {chosen === undefined ? (
        <p>The key you signed in with may not read any collection that can be exported.</p>
      ) : (
        <Section title="Download an export">
          <form
            class="form files-form"
            onSubmit={(event) => {
              event.preventDefault();
              void save.run();
            }}
          >
            <div class="form-row">
              <Field label="Collection">
                <select
                  value={chosen.value}
                  onChange={(event) => {
                    setWhich(event.currentTarget.value);
                    setSaved(undefined);
                  }}
                >
                  {allowed.map((entry) => (
                    <option key={entry.value} value={entry.value}>
                      {entry.label}
                    </option>
                  ))}
                </select>
              </Field>
            </div>
            <fieldset class="choices">
              <legend>Format</legend>
              <label>
                <input type="radio" name="format" checked={format === 'csv'} onChange={() => setFormat('csv')} /> CSV (a
                header row; nested fields as dotted columns)
              </label>
              <label>
                <input type="radio" name="format" checked={format === 'ndjson'} onChange={() => setFormat('ndjson')} />{' '}
                NDJSON (a JSON record a line)
              </label>
            </fieldset>
            {chosen.range || chosen.statuses ? (
              <div class="form-row">
                {chosen.range ? (
                  <>
                    <Field label="Created after" hint="Optional; your local time.">
                      <input
                        type="datetime-local"
                        value={after}
                        onInput={(event) => setAfter(event.currentTarget.value)}
                      />
                    </Field>
                    <Field label="Created before" hint="Optional; your local time.">
                      <input
                        type="datetime-local"
                        value={before}
                        onInput={(event) => setBefore(event.currentTarget.value)}
                      />
                    </Field>
                  </>
                ) : null}
                {chosen.statuses ? (
                  <Field label="Status">
                    <select value={status} onChange={(event) => setStatus(event.currentTarget.value)}>
                      <option value="">Any</option>
                      {chosen.statuses.map((value) => (
                        <option key={value} value={value}>
                          {value}
                        </option>
                      ))}
                    </select>
                  </Field>
                ) : null}
              </div>
            ) : null}
            <div class="actions">
              <button type="submit" class="primary" disabled={save.busy}>
                {save.busy ? 'Downloading…' : 'Download'}
              </button>
            </div>
            <ProblemView error={save.error} context="The export was not downloaded" />
            <Notice>{saved}</Notice>
          </form>
        </Section>
      )}
    </>
  );
}
