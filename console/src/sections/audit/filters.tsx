/** The audit trail's filter form; applying it changes the route's query. */
import type { ComponentChildren, JSX } from 'preact';
import { useId, useState } from 'preact/hooks';
import { get, type Page } from '../../api.js';
import { useCan, useIdentity } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { useLoad } from '../../ui.js';
import { routeQuery, type Filters } from './shared.js';

/** The route's query in the order of the form, so one filtered view has one address. */
const FORM_ORDER = [
  'caller_id',
  'method',
  'action',
  'status',
  'resource',
  'record_id',
  'path',
  'user_id',
  'after',
  'before',
];

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const ACTIONS = ['read', 'create', 'update', 'delete'];

/** An instant of the route (RFC 3339) as a datetime-local input shows it, in the operator's time zone. */
function localInput(iso: string | undefined): string {
  if (iso === undefined) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 19);
}

function isoOf(local: string): string | undefined {
  if (local === '') return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

interface CallerName {
  id: number;
  name: string;
}

/**
 * A filter's label, bound to its control by id: the control's name is the label alone (a label
 * around a select would name it with its options too), its hint is its description.
 */
function Filter({
  label,
  hint,
  children,
}: {
  label: string;
  hint?: string;
  children: (ids: { id: string; 'aria-describedby'?: string }) => ComponentChildren;
}): JSX.Element {
  const id = useId();
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      {children({ id, 'aria-describedby': hint ? `${id}-hint` : undefined })}
      {hint ? (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      ) : null}
    </div>
  );
}

export function AuditFilters({ filters }: { filters: Filters }): JSX.Element {
  const can = useCan();
  const identity = useIdentity();
  const [form, setForm] = useState<Record<string, string>>(() => ({
    ...Object.fromEntries(Object.entries(routeQuery(filters)).filter(([, value]) => value !== undefined)),
    after: localInput(filters.after),
    before: localInput(filters.before),
  }));
  const mayListCallers = can('callers:read');
  const callers = useLoad(
    (signal) =>
      mayListCallers
        ? get<Page<CallerName>>('/v1/callers', { limit: 500, fields: 'id,name', sort: 'id' }, signal).then(
            (page) => page.data,
          )
        : Promise.resolve([] as CallerName[]),
    [mayListCallers],
  );
  const resources = [
    ...new Set([...identity.scopes.map((scope) => scope.slice(0, scope.indexOf(':'))), filters.resource ?? '']),
  ]
    .filter((name) => name !== '')
    .sort();
  const set = (name: string) => (event: JSX.TargetedEvent<HTMLInputElement | HTMLSelectElement>) =>
    setForm((previous) => ({ ...previous, [name]: event.currentTarget.value }));
  const value = (name: string) => form[name] ?? '';
  const apply = (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault();
    const query: Record<string, string | undefined> = {};
    for (const name of FORM_ORDER) {
      const text = (form[name] ?? '').trim();
      query[name] = text === '' ? undefined : text;
    }
    query.after = isoOf(value('after'));
    query.before = isoOf(value('before'));
    navigate(href('audit', query));
  };
  const callerList = callers.data ?? [];
  // Open on a wide screen; on a narrow one the filters would hide the trail until asked for.
  const [openAtStart] = useState(() => matchMedia('(min-width: 901px)').matches);
  const applied = Object.keys(filters).length;
  const knownCaller = callerList.some((caller) => String(caller.id) === value('caller_id'));
  return (
    <details class="panel audit-filters" open={openAtStart}>
      <summary>
        Filters
        {applied > 0 ? ` (${applied} applied)` : ''}
      </summary>
      <form onSubmit={apply} aria-label="Filters">
        <div class="filters">
          {mayListCallers && !callers.error ? (
            <Filter label="Caller">
              {(ids) => (
                <select {...ids} value={value('caller_id')} onChange={set('caller_id')}>
                  <option value="">Any caller</option>
                  {callerList.map((caller) => (
                    <option key={caller.id} value={String(caller.id)}>
                      {caller.name} (#{caller.id})
                    </option>
                  ))}
                  {value('caller_id') !== '' && !knownCaller ? (
                    <option value={value('caller_id')}>Caller #{value('caller_id')}</option>
                  ) : null}
                </select>
              )}
            </Filter>
          ) : (
            <Filter label="Caller id">
              {(ids) => (
                <input
                  {...ids}
                  inputMode="numeric"
                  pattern="[1-9][0-9]*"
                  size={6}
                  value={value('caller_id')}
                  onInput={set('caller_id')}
                />
              )}
            </Filter>
          )}
          <Filter label="Method">
            {(ids) => (
              <select {...ids} value={value('method')} onChange={set('method')}>
                <option value="">Any method</option>
                {METHODS.map((method) => (
                  <option key={method} value={method}>
                    {method}
                  </option>
                ))}
              </select>
            )}
          </Filter>
          <Filter label="Action">
            {(ids) => (
              <select {...ids} value={value('action')} onChange={set('action')}>
                <option value="">Any action</option>
                {ACTIONS.map((action) => (
                  <option key={action} value={action}>
                    {action}
                  </option>
                ))}
              </select>
            )}
          </Filter>
          <Filter label="Status" hint="404, or a class: 4xx">
            {(ids) => (
              <input
                {...ids}
                size={6}
                pattern="[1-5][0-9][0-9]|[2-5]xx|[2-5]XX"
                title="A status (404) or a class of statuses (4xx)"
                value={value('status')}
                onInput={set('status')}
              />
            )}
          </Filter>
          <Filter label="Resource">
            {(ids) => (
              <select {...ids} value={value('resource')} onChange={set('resource')}>
                <option value="">Any resource</option>
                {resources.map((resource) => (
                  <option key={resource} value={resource}>
                    {resource}
                  </option>
                ))}
              </select>
            )}
          </Filter>
          <Filter label="Record id">
            {(ids) => <input {...ids} size={8} maxLength={256} value={value('record_id')} onInput={set('record_id')} />}
          </Filter>
          <Filter label="Path" hint="and the paths below it">
            {(ids) => (
              <input
                {...ids}
                size={18}
                maxLength={2048}
                pattern="/[^?]*"
                title="A path that starts with / (no query string)"
                placeholder="/v1/orders/12"
                value={value('path')}
                onInput={set('path')}
              />
            )}
          </Filter>
          <Filter label="Acting for user id">
            {(ids) => (
              <input
                {...ids}
                inputMode="numeric"
                pattern="[1-9][0-9]*"
                size={6}
                value={value('user_id')}
                onInput={set('user_id')}
              />
            )}
          </Filter>
          <Filter label="From">
            {(ids) => <input {...ids} type="datetime-local" step={1} value={value('after')} onInput={set('after')} />}
          </Filter>
          <Filter label="Until">
            {(ids) => <input {...ids} type="datetime-local" step={1} value={value('before')} onInput={set('before')} />}
          </Filter>
        </div>
        <div class="actions">
          <button type="submit" class="primary">
            Apply filters
          </button>
          {Object.keys(filters).length > 0 ? <a href={href('audit')}>Clear filters</a> : null}
        </div>
      </form>
    </details>
  );
}
