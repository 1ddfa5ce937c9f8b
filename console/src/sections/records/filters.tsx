/** A list's filters, kept in the address, and the query the list sends from them. */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { href, navigate } from '../../router.js';
import { Field } from '../../ui.js';

export const PAGE_SIZES = ['25', '50', '100', '200'];
export const DEFAULT_PAGE_SIZE = '25';

export interface FilterSpec {
  name: string;
  label: string;
  kind: 'text' | 'email' | 'id' | 'select' | 'datetime';
  options?: [value: string, label: string][];
  hint?: string;
  /** Shown behind "More filters": the filters used less often. */
  more?: boolean;
}

/** `2026-06-01T12:00:00.000Z` → `2026-06-01T14:00` in the browser's time zone (a datetime-local value). */
export function toLocalInput(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (value: number) => String(value).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
export function fromLocalInput(value: string): string {
  if (value === '') return '';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

export function valuesOf(params: URLSearchParams, names: string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of names) values[name] = params.get(name) ?? '';
  return values;
}

/**
 * The filters of a list, kept in the address (`#/orders?status=placed`): Apply navigates, so
 * Back returns to the previous filters and a filtered list can be bookmarked.
 */
export function FilterForm({
  section,
  params,
  filters,
  label,
}: {
  section: string;
  params: URLSearchParams;
  filters: FilterSpec[];
  label: string;
}): JSX.Element {
  const names = [...filters.map((filter) => filter.name), 'limit'];
  const fromRoute = () => valuesOf(params, names);
  const [values, setValues] = useState(fromRoute);
  const routeText = params.toString();
  useEffect(() => setValues(fromRoute()), [routeText]);
  const set = (name: string, value: string) => setValues((previous) => ({ ...previous, [name]: value }));
  const applied = filters.some((filter) => (params.get(filter.name) ?? '') !== '');
  const more = filters.filter((filter) => filter.more);
  const moreApplied = more.some((filter) => (params.get(filter.name) ?? '') !== '');
  const control = (filter: FilterSpec) => (
    <Field key={filter.name} label={filter.label} hint={filter.hint}>
      {filter.kind === 'select' ? (
        <select
          name={filter.name}
          value={values[filter.name]}
          onChange={(event) => set(filter.name, event.currentTarget.value)}
        >
          {filter.options!.map(([value, text]) => (
            <option key={value} value={value}>
              {text}
            </option>
          ))}
        </select>
      ) : filter.kind === 'datetime' ? (
        <input
          type="datetime-local"
          name={filter.name}
          value={values[filter.name] ? toLocalInput(values[filter.name]!) : ''}
          onChange={(event) => set(filter.name, fromLocalInput(event.currentTarget.value))}
        />
      ) : (
        <input
          type={filter.kind === 'email' ? 'email' : filter.kind === 'id' ? 'number' : 'search'}
          min={filter.kind === 'id' ? 1 : undefined}
          step={filter.kind === 'id' ? 1 : undefined}
          inputMode={filter.kind === 'id' ? 'numeric' : undefined}
          name={filter.name}
          class={filter.kind === 'id' ? 'records-id-input' : undefined}
          value={values[filter.name]}
          onInput={(event) => set(filter.name, event.currentTarget.value)}
        />
      )}
    </Field>
  );
  return (
    <form
      class="records-filters"
      role="search"
      aria-label={label}
      onSubmit={(event) => {
        event.preventDefault();
        navigate(href(section, values));
      }}
    >
      <div class="filters">
        {filters.filter((filter) => !filter.more).map(control)}
        <Field label="Per page">
          <select
            name="limit"
            value={values.limit || DEFAULT_PAGE_SIZE}
            onChange={(event) => set('limit', event.currentTarget.value)}
          >
            {PAGE_SIZES.map((size) => (
              <option key={size} value={size}>
                {size}
              </option>
            ))}
          </select>
        </Field>
        <div class="actions">
          <button type="submit" class="primary">
            Apply
          </button>
          {applied ? (
            <a class="button" href={href(section)}>
              Clear filters
            </a>
          ) : null}
        </div>
      </div>
      {more.length > 0 ? (
        <details class="records-more" open={moreApplied}>
          <summary>More filters{moreApplied ? ' (in use)' : ''}</summary>
          <div class="filters">{more.map(control)}</div>
        </details>
      ) : null}
    </form>
  );
}

/** The query a list sends: the filters in the address, and the page size. */
export function listQuery(params: URLSearchParams, names: string[]): Record<string, string | undefined> {
  const query: Record<string, string | undefined> = {};
  for (const name of names) {
    const value = params.get(name);
    if (value) query[name] = value;
  }
  query.limit = params.get('limit') || DEFAULT_PAGE_SIZE;
  return query;
}
