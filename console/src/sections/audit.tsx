/**
 * The audit trail (GET /v1/audit-events): every request, allowed or refused, newest first, with
 * the API's filters (caller, user acted for, method, path and those below it, resource, record
 * id, action, a status or a class of statuses, time). The filters live in the route's query, so a
 * filtered view is a link: `#/audit?resource=orders&record_id=12`.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useId, useState } from 'preact/hooks';
import { ApiError, get, type Page } from '../api.js';
import { duration } from '../format.js';
import { useCan, useIdentity } from '../identity.js';
import { href, navigate, type ViewProps } from '../router.js';
import {
  Badge,
  CopyButton,
  Header,
  PagedTable,
  ProblemView,
  Section,
  Time,
  useLoad,
  usePaged,
  type Column,
} from '../ui.js';
import './audit.css';

export interface AuditEvent {
  id: number;
  at: string;
  request_id: string;
  caller_id: number | null;
  caller_name: string | null;
  credential: string | null;
  user_id: number | null;
  method: string;
  path: string;
  resource: string | null;
  record_id: string | null;
  action: string | null;
  status: number;
  duration_ms: number;
  client_ip: string | null;
}

/**
 * The filters of the view, each a query parameter of the API. The route keeps a status class in
 * `status` ("4xx", one field of the form), the API takes it as `status_class`.
 */
const FILTERS = [
  'caller_id',
  'user_id',
  'method',
  'path',
  'resource',
  'record_id',
  'action',
  'status',
  'status_class',
  'after',
  'before',
] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

const PAGE_SIZE = 50;

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

/** The link to the audit trail of one record: `auditOf('orders', 12)`; other sections may use it. */
export function auditOf(resource: string, recordId: string | number): string {
  return href('audit', { resource, record_id: String(recordId) });
}

function filtersOf(params: URLSearchParams): Filters {
  const filters: Filters = {};
  for (const name of FILTERS) {
    const value = params.get(name);
    if (value !== null && value !== '') filters[name] = value;
  }
  // "4xx" in the status field is a class of statuses; a method in the address may be in lower case.
  if (filters.status !== undefined && /^[1-5]xx$/i.test(filters.status)) {
    filters.status_class = filters.status.toLowerCase();
    delete filters.status;
  }
  if (filters.method !== undefined) filters.method = filters.method.toUpperCase();
  return filters;
}

function statusTone(status: number): 'good' | 'bad' | 'warn' | 'neutral' {
  if (status >= 500) return 'bad';
  if (status >= 400) return 'warn';
  if (status >= 200 && status < 300) return 'good';
  return 'neutral';
}

function StatusBadge({ status }: { status: number }): JSX.Element {
  return <Badge tone={statusTone(status)}>{status}</Badge>;
}

/** The query of the current filters, as the route keeps them (a status class in status). */
function routeQuery(filters: Filters): Record<string, string | undefined> {
  const { status_class, ...rest } = filters;
  return { ...rest, status: status_class ?? rest.status };
}

export function AuditView({ parts, params }: ViewProps): JSX.Element {
  const filters = filtersOf(params);
  if (parts[0] !== undefined) return <AuditDetails id={parts[0]} filters={filters} />;
  return <AuditList filters={filters} />;
}

function AuditList({ filters }: { filters: Filters }): JSX.Element {
  const paged = usePaged<AuditEvent>('/v1/audit-events', { ...filters, limit: PAGE_SIZE });
  const back = routeQuery(filters);
  const columns: Column<AuditEvent>[] = [
    {
      label: 'Time',
      render: (event) => (
        <a href={href('audit', event.id, back)}>
          <Time at={event.at} />
          <span class="visually-hidden">, details of request {event.id}</span>
        </a>
      ),
    },
    {
      label: 'Caller',
      render: (event) =>
        event.caller_name === null ? (
          <span class="audit-muted">none</span>
        ) : event.caller_id !== null ? (
          <a href={href('audit', { ...back, caller_id: event.caller_id })} title="Only the requests of this caller">
            {event.caller_name}
          </a>
        ) : (
          event.caller_name
        ),
    },
    { label: 'Method', render: (event) => <code>{event.method}</code> },
    { label: 'Path', render: (event) => <code class="audit-path">{event.path}</code> },
    { label: 'Status', render: (event) => <StatusBadge status={event.status} /> },
    { label: 'Duration', numeric: true, optional: true, render: (event) => duration(event.duration_ms) },
    { label: 'Request id', optional: true, render: (event) => <code class="audit-id">{event.request_id}</code> },
  ];
  const described = describe(filters, paged.rows.find((event) => event.caller_name !== null)?.caller_name);
  return (
    <>
      <Header title="Audit trail" />
      <p class="stat-note">
        Every request to rowi, allowed or refused, newest first. The trail is written about once a second, so the last
        second's requests may not be listed yet.
      </p>
      <AuditFilters key={JSON.stringify(filters)} filters={filters} />
      <Section title={described === '' ? 'Requests' : `Requests ${described}`}>
        <PagedTable
          paged={paged}
          caption="Audit events"
          columns={columns}
          rowKey={(event) => event.id}
          empty={Object.keys(filters).length > 0 ? 'No request matches these filters.' : 'No request recorded yet.'}
        />
      </Section>
    </>
  );
}

/** The filters in words, for the section's title: "of caller 2, PATCH, on orders 12". */
function describe(filters: Filters, callerName?: string | null): string {
  const words: string[] = [];
  if (filters.method) words.push(filters.method.toUpperCase());
  if (filters.action) words.push(`(${filters.action})`);
  if (filters.resource) words.push(`on ${filters.resource}${filters.record_id ? ` ${filters.record_id}` : ''}`);
  else if (filters.record_id) words.push(`on record ${filters.record_id}`);
  if (filters.path) words.push(`to ${filters.path}`);
  if (filters.caller_id)
    words.push(`of ${callerName ? `${callerName} (caller ${filters.caller_id})` : `caller ${filters.caller_id}`}`);
  if (filters.user_id) words.push(`for user ${filters.user_id}`);
  if (filters.status) words.push(`answered ${filters.status}`);
  if (filters.status_class) words.push(`answered ${filters.status_class}`);
  return words.join(' ');
}

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

function AuditFilters({ filters }: { filters: Filters }): JSX.Element {
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

/** The console's sections that show a resource's record, by the resource's name. */
const RECORD_SECTIONS: Record<string, string> = {
  users: 'users',
  items: 'items',
  stock: 'items',
  orders: 'orders',
  callers: 'callers',
  'webhook-endpoints': 'webhooks',
};

function AuditDetails({ id, filters }: { id: string; filters: Filters }): JSX.Element {
  const back = routeQuery(filters);
  const loaded = useLoad(
    async (signal) => {
      if (!/^[1-9][0-9]{0,15}$/.test(id))
        throw new ApiError({ type: '/problems/not-found', title: 'Not found', status: 404 });
      const page = await get<Page<AuditEvent>>('/v1/audit-events', { id }, signal);
      const event = page.data[0];
      if (event === undefined)
        throw new ApiError({
          type: '/problems/not-found',
          title: 'Not found',
          status: 404,
          detail: `No request ${id} in the audit trail (it may have been pruned after its retention).`,
        });
      return event;
    },
    [id],
  );
  const event = loaded.data;
  const section = event?.resource ? RECORD_SECTIONS[event.resource] : undefined;
  const recordLink =
    event && section && event.record_id !== null && /^[1-9][0-9]*$/.test(event.record_id)
      ? href(section, event.record_id)
      : undefined;
  return (
    <>
      <Header title={`Request ${id}`}>
        <a href={href('audit', back)}>Back to the trail</a>
      </Header>
      <ProblemView error={loaded.error} context="Could not read this request" />
      {loaded.loading && event === undefined ? <p aria-busy="true">Loading…</p> : null}
      {event ? (
        <>
          <Section title="What was asked, and the answer">
            <dl class="record">
              <dt>Time</dt>
              <dd>
                <Time at={event.at} /> <span class="audit-muted">({event.at})</span>
              </dd>
              <dt>Method</dt>
              <dd>
                <code>{event.method}</code>
              </dd>
              <dt>Path</dt>
              <dd>
                <code>{event.path}</code>
              </dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge status={event.status} />
              </dd>
              <dt>Duration</dt>
              <dd>{duration(event.duration_ms)}</dd>
              <dt>Resource</dt>
              <dd>{event.resource ?? '—'}</dd>
              <dt>Record id</dt>
              <dd>{event.record_id ?? '—'}</dd>
              <dt>Action</dt>
              <dd>{event.action ?? '—'}</dd>
              <dt>Caller</dt>
              <dd>
                {event.caller_name ?? 'none'}
                {event.caller_id !== null ? ` (#${event.caller_id})` : ''}
              </dd>
              <dt>Credential</dt>
              <dd>{event.credential ?? '—'}</dd>
              <dt>Acting for user</dt>
              <dd>{event.user_id ?? '—'}</dd>
              <dt>Client address</dt>
              <dd>{event.client_ip ?? '—'}</dd>
              <dt>Request id</dt>
              <dd>
                <code>{event.request_id}</code> <CopyButton text={event.request_id} label="Copy request id" />
              </dd>
              <dt>Audit event id</dt>
              <dd>{event.id}</dd>
            </dl>
          </Section>
          <Section title="Related">
            <ul class="audit-related">
              {event.resource !== null && event.record_id !== null ? (
                <li>
                  <a href={href('audit', { resource: event.resource, record_id: event.record_id })}>
                    Every request on this record
                  </a>
                </li>
              ) : null}
              {event.caller_id !== null ? (
                <li>
                  <a href={href('audit', { caller_id: event.caller_id })}>Every request of this caller</a>
                </li>
              ) : null}
              {recordLink ? (
                <li>
                  <a href={recordLink}>Open the record</a>
                </li>
              ) : null}
            </ul>
          </Section>
        </>
      ) : null}
    </>
  );
}
