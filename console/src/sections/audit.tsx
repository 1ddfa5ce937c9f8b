/**
 * The audit trail (GET /v1/audit-events): every request, allowed or refused, newest first, with
 * the API's filters (caller, user acted for, resource, action, status, time) and three the API
 * does not have (method, path, record id), which the console applies to the pages it reads. The
 * filters live in the route's query, so a filtered view is a link: `#/audit?resource=orders&record_id=12`.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useId, useState } from 'preact/hooks';
import { ApiError, call, get, type Page } from '../api.js';
import { count, duration } from '../format.js';
import { useCan, useIdentity } from '../identity.js';
import { href, navigate } from '../router.js';
import {
  Badge,
  CopyButton,
  Header,
  PagedTable,
  ProblemView,
  Section,
  Time,
  useLoad,
  type Column,
  type Paged,
} from '../ui.js';
import type { ViewProps } from './index.js';
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

/** The query parameters of the view: the API's filters, then the console's own. */
const API_FILTERS = ['caller_id', 'user_id', 'resource', 'action', 'status', 'after', 'before'] as const;
const OWN_FILTERS = ['method', 'path', 'record_id', 'status_class'] as const;
type FilterName = (typeof API_FILTERS)[number] | (typeof OWN_FILTERS)[number];
type Filters = Partial<Record<FilterName, string>>;

/** Rows a page shows when the API filters alone select them. */
const PAGE_SIZE = 50;
/** With a filter of the console's own, the trail is read this many at a time… */
const SCAN_PAGE = 500;
/** …until a page has PAGE_SIZE matches, or this many requests were read for it. */
const SCAN_MOST = 5000;

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
  for (const name of [...API_FILTERS, ...OWN_FILTERS]) {
    const value = params.get(name);
    if (value !== null && value !== '') filters[name] = value;
  }
  // "4xx" in the status field is a class of statuses: the console's own filter.
  if (filters.status !== undefined && /^[1-5]xx$/i.test(filters.status)) {
    filters.status_class = filters.status[0];
    delete filters.status;
  }
  return filters;
}

function hasOwnFilter(filters: Filters): boolean {
  return OWN_FILTERS.some((name) => filters[name] !== undefined);
}

/** Whether an event passes the filters the API does not apply. */
function matches(event: AuditEvent, filters: Filters): boolean {
  if (filters.method !== undefined && event.method !== filters.method.toUpperCase()) return false;
  if (filters.path !== undefined && !pathMatches(event.path, filters.path)) return false;
  if (filters.record_id !== undefined && event.record_id !== filters.record_id) return false;
  if (filters.status_class !== undefined && String(event.status)[0] !== filters.status_class) return false;
  return true;
}

/** A path filter finds the path itself and those below it: /v1/orders/12 finds /v1/orders/12/cancel, not /v1/orders/123. */
function pathMatches(path: string, filter: string): boolean {
  const wanted = filter.length > 1 && filter.endsWith('/') ? filter.slice(0, -1) : filter;
  return path === wanted || path.startsWith(`${wanted}/`);
}

interface AuditPage extends Page<AuditEvent> {
  /** How many requests were read from the trail for this page. */
  scanned: number;
}

/** A page of the trail from `cursor`: one read of the API, or a search through several. */
async function readPage(filters: Filters, cursor: string | undefined, signal: AbortSignal): Promise<AuditPage> {
  const query: Record<string, string | number | undefined> = { cursor };
  for (const name of API_FILTERS) query[name] = filters[name];
  if (!hasOwnFilter(filters)) {
    const page = (await call<Page<AuditEvent>>('/v1/audit-events', { query: { ...query, limit: PAGE_SIZE }, signal }))
      .body;
    return { ...page, scanned: page.data.length };
  }
  const rows: AuditEvent[] = [];
  let scanned = 0;
  let next: string | null | undefined = cursor;
  do {
    const page: Page<AuditEvent> = (
      await call<Page<AuditEvent>>('/v1/audit-events', {
        query: { ...query, cursor: next ?? undefined, limit: SCAN_PAGE },
        signal,
      })
    ).body;
    scanned += page.data.length;
    rows.push(...page.data.filter((event) => matches(event, filters)));
    next = page.next_cursor;
  } while (next !== null && rows.length < PAGE_SIZE && scanned < SCAN_MOST);
  return { data: rows, next_cursor: next, scanned };
}

/** The trail page by page, as usePaged does, with the searching reads of readPage. */
function useAuditPages(filters: Filters): Paged<AuditEvent> & { scanned: number | undefined } {
  const key = JSON.stringify(filters);
  const [state, setState] = useState<{ key: string; cursors: (string | undefined)[] }>({ key, cursors: [undefined] });
  const cursors = state.key === key ? state.cursors : [undefined];
  if (state.key !== key) setState({ key, cursors });
  const cursor = cursors.at(-1);
  const loaded = useLoad((signal) => readPage(filters, cursor, signal), [key, cursor]);
  const nextCursor = loaded.data?.next_cursor ?? null;
  return {
    ...loaded,
    rows: loaded.data?.data ?? [],
    pageNumber: cursors.length,
    scanned: loaded.data?.scanned,
    next: nextCursor === null ? undefined : () => setState({ key, cursors: [...cursors, nextCursor] }),
    previous: cursors.length > 1 ? () => setState({ key, cursors: cursors.slice(0, -1) }) : undefined,
  };
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

/** The query of the current filters, as the route keeps them (a status class as "4xx"). */
function routeQuery(filters: Filters): Record<string, string | undefined> {
  const { status_class, ...rest } = filters;
  return { ...rest, status: status_class !== undefined ? `${status_class}xx` : rest.status };
}

export function AuditView({ parts, params }: ViewProps): JSX.Element {
  const filters = filtersOf(params);
  if (parts[0] !== undefined) return <AuditDetails id={parts[0]} filters={filters} />;
  return <AuditList filters={filters} />;
}

function AuditList({ filters }: { filters: Filters }): JSX.Element {
  const paged = useAuditPages(filters);
  const own = hasOwnFilter(filters);
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
        {own ? (
          <p class="stat-note" role="status">
            Method, path, record id and a status class are not filters of the API: the console reads the trail{' '}
            {SCAN_PAGE} requests at a time (with the other filters) and keeps those that match, up to {count(SCAN_MOST)}{' '}
            requests a page.
            {paged.scanned !== undefined && !paged.loading
              ? ` This page searched ${count(paged.scanned)} requests${paged.next ? '; Next searches older ones' : ''}.`
              : ''}
          </p>
        ) : null}
        <PagedTable
          paged={paged}
          caption="Audit events"
          columns={columns}
          rowKey={(event) => event.id}
          empty={
            own && paged.next !== undefined
              ? 'No match among the requests searched for this page; Next searches older ones.'
              : Object.keys(filters).length > 0
                ? 'No request matches these filters.'
                : 'No request recorded yet.'
          }
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
  if (filters.status_class) words.push(`answered ${filters.status_class}xx`);
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
                pattern="[1-5][0-9][0-9]|[1-5]xx|[1-5]XX"
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
