/**
 * Records: users, items with their stock and movements, orders with their lines. Lists filtered
 * with the filters each list operation offers (kept in the address, so a filtered list can be
 * shared), paged with the API's cursors; a record opened, changed with PATCH and deleted with the
 * ETag read with it (If-Match), so a change made by someone else in between is refused (412) and
 * explained, never overwritten. Every record string is rendered as text; links are built from ids only.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call, type Answer, type Page } from '../api.js';
import { count } from '../format.js';
import { useCan } from '../identity.js';
import { href, navigate, type ViewProps } from '../router.js';
import {
  Badge,
  ConfirmButton,
  Field,
  Header,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
  type Column,
} from '../ui.js';
import './records.css';

interface Owned {
  id: number;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}
interface User extends Owned {
  name: string;
  email: string;
}
interface Item extends Owned {
  name: string;
  sku: string;
  price: string;
}
interface Stock {
  item_id: number;
  quantity: number;
  reserved: number;
  updated_at: string;
}
interface Movement {
  id: number;
  item_id: number;
  kind: 'set' | 'reserve' | 'release' | 'fulfil';
  quantity_change: number;
  reserved_change: number;
  quantity_after: number;
  reserved_after: number;
  order_id: number | null;
  created_at: string;
}
interface OrderLine {
  item_id: number;
  quantity: number;
  unit_price: string;
  line_total: string;
}
type OrderStatus = 'placed' | 'fulfilled' | 'cancelled';
interface Order extends Owned {
  name: string;
  user_id: number | null;
  status: OrderStatus;
  lines: OrderLine[];
  total: string;
  /** Only with expand=user (lists): the user, or null when the key may not see it. */
  user?: User | null;
}

/* ------------------------------------------------------------------------------------------ */
/* Shared parts                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/**
 * A message handed from one view to the next across a navigation ("User created."), shown once
 * by the view that opens next.
 */
let flash: string | undefined;
function setFlash(message: string): void {
  flash = message;
}
function takeFlash(): string | undefined {
  const message = flash;
  flash = undefined;
  return message;
}

const PAGE_SIZES = ['25', '50', '100', '200'];
const DEFAULT_PAGE_SIZE = '25';

interface FilterSpec {
  name: string;
  label: string;
  kind: 'text' | 'email' | 'id' | 'select' | 'datetime';
  options?: [value: string, label: string][];
  hint?: string;
  /** Shown behind "More filters": the filters used less often. */
  more?: boolean;
}

/** `2026-06-01T12:00:00.000Z` → `2026-06-01T14:00` in the browser's time zone (a datetime-local value). */
function toLocalInput(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (value: number) => String(value).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
function fromLocalInput(value: string): string {
  if (value === '') return '';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

function valuesOf(params: URLSearchParams, names: string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of names) values[name] = params.get(name) ?? '';
  return values;
}

/**
 * The filters of a list, kept in the address (`#/orders?status=placed`): Apply navigates, so
 * Back returns to the previous filters and a filtered list can be bookmarked.
 */
function FilterForm({
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
function listQuery(params: URLSearchParams, names: string[]): Record<string, string | undefined> {
  const query: Record<string, string | undefined> = {};
  for (const name of names) {
    const value = params.get(name);
    if (value) query[name] = value;
  }
  query.limit = params.get('limit') || DEFAULT_PAGE_SIZE;
  return query;
}

/** A record read with its ETag; `replace` puts in what a write answered (the record and its new ETag). */
function useRecord<T>(path: string) {
  const loaded = useLoad((signal) => call<T>(path, { signal }), [path]);
  const [written, setWritten] = useState<Answer<T> | undefined>(undefined);
  useEffect(() => setWritten(undefined), [loaded.data]);
  const answer = written ?? loaded.data;
  return {
    record: answer?.body,
    etag: answer?.etag ?? null,
    error: loaded.error,
    loading: loaded.loading,
    reload: loaded.reload,
    replace: setWritten,
  };
}

function isStale(error: unknown): boolean {
  return error instanceof ApiError && error.kind === 'precondition-failed';
}

/** A write's problem, explained; when the record changed meanwhile (412), the way to its current version. */
function WriteProblem({
  error,
  context,
  onReload,
}: {
  error: unknown;
  context: string;
  onReload: () => void;
}): JSX.Element | null {
  if (error === undefined) return null;
  return (
    <div class="records-write-problem">
      <ProblemView error={error} context={context} />
      {isStale(error) ? (
        <button type="button" class="primary" onClick={onReload}>
          Reload
        </button>
      ) : null}
    </div>
  );
}

/** A caller, by its id: a link when the key may read callers. */
function CallerRef({ id }: { id: number | null }): JSX.Element {
  const can = useCan();
  if (id === null) return <span>none (an external issuer's subject, or from before owners)</span>;
  return can('callers:read') ? <a href={href('callers', id)}>caller #{id}</a> : <span>caller #{id}</span>;
}

/** The fields every record has, for the end of its dl.record. */
function Provenance({ record }: { record: Owned }): JSX.Element {
  return (
    <>
      <dt>Created by</dt>
      <dd>
        <CallerRef id={record.created_by} />
      </dd>
      <dt>Created</dt>
      <dd>
        <Time at={record.created_at} />
      </dd>
      <dt>Last changed</dt>
      <dd>
        <Time at={record.updated_at} />
      </dd>
    </>
  );
}

interface EditSpec {
  name: string;
  label: string;
  kind: 'text' | 'email' | 'money' | 'id';
  hint?: string;
  maxLength?: number;
}

/**
 * A form of a record's editable fields, sent as PATCH (merge patch) with only the fields that
 * changed, and If-Match with the ETag read with the record.
 */
function ChangeForm<T extends Owned>({
  title,
  record,
  fields,
  save,
  onSaved,
  onReload,
  onClose,
}: {
  title: string;
  record: T;
  fields: EditSpec[];
  save: (patch: Record<string, unknown>) => Promise<Answer<T>>;
  onSaved: (answer: Answer<T>) => void;
  onReload: () => void;
  onClose: () => void;
}): JSX.Element {
  const initial = () => {
    const values: Record<string, string> = {};
    for (const field of fields) {
      const value = (record as unknown as Record<string, unknown>)[field.name];
      values[field.name] = value === null || value === undefined ? '' : String(value);
    }
    return values;
  };
  const [values, setValues] = useState(initial);
  const [unchanged, setUnchanged] = useState(false);
  const action = useAction(save);
  const submit = async (event: Event) => {
    event.preventDefault();
    const before = initial();
    const patch: Record<string, unknown> = {};
    for (const field of fields) {
      const value = values[field.name] ?? '';
      if (value === before[field.name]) continue;
      patch[field.name] = field.kind === 'id' ? Number(value) : field.kind === 'text' ? value : value.trim();
    }
    if (Object.keys(patch).length === 0) {
      setUnchanged(true);
      return;
    }
    setUnchanged(false);
    const answer = await action.run(patch);
    if (answer !== undefined) onSaved(answer);
  };
  return (
    <Section title={title}>
      <form class="form" onSubmit={submit}>
        {fields.map((field) => (
          <Field key={field.name} label={field.label} hint={field.hint}>
            <input
              name={field.name}
              type={field.kind === 'email' ? 'email' : field.kind === 'id' ? 'number' : 'text'}
              inputMode={field.kind === 'money' ? 'decimal' : field.kind === 'id' ? 'numeric' : undefined}
              min={field.kind === 'id' ? 1 : undefined}
              required
              maxLength={field.maxLength}
              class={field.kind === 'text' || field.kind === 'email' ? 'records-wide-input' : undefined}
              value={values[field.name]}
              onInput={(event) => {
                const value = event.currentTarget.value;
                setValues((previous) => ({ ...previous, [field.name]: value }));
              }}
            />
          </Field>
        ))}
        {unchanged ? <p class="field-hint">Nothing was changed, so nothing was sent.</p> : null}
        <WriteProblem error={action.error} context="Not saved" onReload={onReload} />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? 'Saving…' : 'Save changes'}
          </button>
          <button type="button" onClick={onClose}>
            Close without saving
          </button>
        </div>
      </form>
    </Section>
  );
}

/** A form creating a record (POST); opens the new record. */
function CreateForm({
  title,
  fields,
  create,
  onClose,
}: {
  title: string;
  fields: EditSpec[];
  create: (body: Record<string, string>) => Promise<void>;
  onClose: () => void;
}): JSX.Element {
  const [values, setValues] = useState<Record<string, string>>({});
  const action = useAction(create);
  return (
    <Section title={title}>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          const body: Record<string, string> = {};
          for (const field of fields)
            body[field.name] = field.kind === 'text' ? (values[field.name] ?? '') : (values[field.name] ?? '').trim();
          void action.run(body);
        }}
      >
        {fields.map((field) => (
          <Field key={field.name} label={field.label} hint={field.hint}>
            <input
              name={field.name}
              type={field.kind === 'email' ? 'email' : 'text'}
              inputMode={field.kind === 'money' ? 'decimal' : undefined}
              required
              maxLength={field.maxLength}
              class={field.kind === 'text' || field.kind === 'email' ? 'records-wide-input' : undefined}
              value={values[field.name] ?? ''}
              onInput={(event) => {
                const value = event.currentTarget.value;
                setValues((previous) => ({ ...previous, [field.name]: value }));
              }}
            />
          </Field>
        ))}
        <ProblemView error={action.error} context="Not created" />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? 'Creating…' : 'Create'}
          </button>
          <button type="button" onClick={onClose}>
            Close
          </button>
        </div>
      </form>
    </Section>
  );
}

/** The link back to a list. */
function BackLink({ section, label }: { section: string; label: string }): JSX.Element {
  return (
    <p class="records-back">
      <a href={href(section)}>← {label}</a>
    </p>
  );
}

/** A record's id as a route part: a positive integer, or the text as given (rowi explains a bad one). */
function recordPath(collection: string, id: string): string {
  return `/v1/${collection}/${encodeURIComponent(id)}`;
}

/** What a record view shows while its record is not (yet) there. */
function NotLoaded({
  error,
  loading,
  what,
  section,
  listLabel,
}: {
  error: unknown;
  loading: boolean;
  what: string;
  section: string;
  listLabel: string;
}): JSX.Element {
  return (
    <>
      {loading ? <p aria-live="polite">Loading…</p> : null}
      <ProblemView error={error} context={`Could not read ${what}`} />
      {!loading ? <BackLink section={section} label={listLabel} /> : null}
    </>
  );
}

/**
 * A record's Delete (ConfirmButton, DELETE with If-Match); on success, the list, saying so.
 */
function useDelete(path: string, etag: string | null, section: string, said: string) {
  return useAction(async () => {
    await call(path, { method: 'DELETE', ifMatch: etag });
    setFlash(said);
    navigate(href(section));
  });
}

/* ------------------------------------------------------------------------------------------ */
/* Users                                                                                        */
/* ------------------------------------------------------------------------------------------ */

const USER_FILTERS: FilterSpec[] = [
  { name: 'name', label: 'Exact name', kind: 'text' },
  { name: 'email', label: 'Email', kind: 'email' },
  { name: 'created_by', label: 'Created by caller', kind: 'id', more: true },
  { name: 'created_after', label: 'Created after', kind: 'datetime', more: true },
  { name: 'created_before', label: 'Created before', kind: 'datetime', more: true },
  {
    name: 'sort',
    label: 'Sort by',
    kind: 'select',
    options: [
      ['', 'Oldest first'],
      ['-id', 'Newest first'],
      ['name', 'Name A–Z'],
      ['-name', 'Name Z–A'],
      ['email', 'Email A–Z'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const USER_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Name', kind: 'text', maxLength: 200, hint: '1–200 characters' },
  { name: 'email', label: 'Email', kind: 'email', maxLength: 254, hint: 'Unique, compared in any case' },
];

export function UsersView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <UserList params={params} /> : <UserRecord id={parts[0]} />}
    </div>
  );
}

function UserList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const [creating, setCreating] = useState(false);
  const paged = usePaged<User>(
    '/v1/users',
    listQuery(
      params,
      USER_FILTERS.map((filter) => filter.name),
    ),
  );
  const columns: Column<User>[] = [
    { label: 'Id', render: (user) => user.id, numeric: true, optional: true },
    { label: 'Name', render: (user) => <a href={href('users', user.id)}>{user.name}</a> },
    { label: 'Email', render: (user) => user.email },
    { label: 'Created', render: (user) => <Time at={user.created_at} />, optional: true },
    { label: 'Last changed', render: (user) => <Time at={user.updated_at} />, optional: true },
  ];
  return (
    <>
      <Header title="Users">
        {can('users:create') && !creating ? (
          <button type="button" onClick={() => setCreating(true)}>
            New user
          </button>
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      {creating ? (
        <CreateForm
          title="New user"
          fields={USER_FIELDS}
          onClose={() => setCreating(false)}
          create={async (body) => {
            const created = await call<User>('/v1/users', { method: 'POST', body });
            setFlash('User created.');
            navigate(href('users', created.body.id));
          }}
        />
      ) : null}
      <FilterForm section="users" params={params} filters={USER_FILTERS} label="Filter users" />
      <PagedTable paged={paged} caption="Users" columns={columns} rowKey={(user) => user.id} empty="No user matches." />
    </>
  );
}

function UserRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('users', id);
  const user = useRecord<User>(path);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, user.etag, 'users', `User #${id} deleted.`);
  const record = user.record;
  return (
    <>
      <BackLink section="users" label="Users" />
      <Header title={record?.name ?? `User #${id}`}>
        {record && can('users:update') && !editing ? (
          <button
            type="button"
            onClick={() => {
              setEditing(true);
              setNotice(undefined);
            }}
          >
            Change
          </button>
        ) : null}
        {record && can('users:delete') ? (
          <ConfirmButton
            key="Delete"
            label="Delete"
            confirm="Delete this user? Their orders stay, without a user."
            disabled={remove.busy}
            onConfirm={() => void remove.run()}
          />
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      <WriteProblem
        error={remove.error}
        context="Not deleted"
        onReload={() => {
          remove.clear();
          user.reload();
        }}
      />
      {record === undefined ? (
        <NotLoaded error={user.error} loading={user.loading} what={`user #${id}`} section="users" listLabel="Users" />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={user.etag}
              title="Change user"
              record={record}
              fields={USER_FIELDS}
              save={(patch) => call<User>(path, { method: 'PATCH', body: patch, ifMatch: user.etag })}
              onSaved={(answer) => {
                user.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={user.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="User">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Name</dt>
              <dd>{record.name}</dd>
              <dt>Email</dt>
              <dd>{record.email}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          {can('orders:read') ? <OrdersOfUser userId={record.id} /> : null}
        </>
      )}
    </>
  );
}

function OrdersOfUser({ userId }: { userId: number }): JSX.Element {
  const paged = usePaged<Order>('/v1/orders', { user_id: userId, limit: 10, sort: '-id' });
  return (
    <Section title="Orders of this user">
      <PagedTable
        paged={paged}
        caption="Orders of this user"
        columns={orderColumns(false)}
        rowKey={(order) => order.id}
        empty="This user has no orders."
      />
    </Section>
  );
}

/* ------------------------------------------------------------------------------------------ */
/* Items                                                                                        */
/* ------------------------------------------------------------------------------------------ */

const ITEM_FILTERS: FilterSpec[] = [
  { name: 'name', label: 'Exact name', kind: 'text' },
  { name: 'sku', label: 'SKU', kind: 'text' },
  { name: 'created_by', label: 'Created by caller', kind: 'id', more: true },
  { name: 'created_after', label: 'Created after', kind: 'datetime', more: true },
  { name: 'created_before', label: 'Created before', kind: 'datetime', more: true },
  {
    name: 'sort',
    label: 'Sort by',
    kind: 'select',
    options: [
      ['', 'Oldest first'],
      ['-id', 'Newest first'],
      ['name', 'Name A–Z'],
      ['sku', 'SKU'],
      ['price', 'Price, lowest first'],
      ['-price', 'Price, highest first'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const ITEM_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Name', kind: 'text', maxLength: 200, hint: '1–200 characters' },
  {
    name: 'sku',
    label: 'SKU',
    kind: 'text',
    maxLength: 64,
    hint: 'Unique; letters, digits, “.”, “_”, “/” or “-”',
  },
  { name: 'price', label: 'Price', kind: 'money', maxLength: 13, hint: 'A decimal, at most 2 places: 12.50' },
];

export function ItemsView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <ItemList params={params} /> : <ItemRecord id={parts[0]} />}
    </div>
  );
}

function ItemList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const [creating, setCreating] = useState(false);
  const paged = usePaged<Item>(
    '/v1/items',
    listQuery(
      params,
      ITEM_FILTERS.map((filter) => filter.name),
    ),
  );
  // The stock of the items on this page, in one call (GET /v1/items/stock?id=…).
  const ids = paged.rows.map((item) => item.id).join(',');
  const readsStock = can('stock:read');
  const stock = useLoad(
    (signal) =>
      readsStock && ids !== ''
        ? call<Page<Stock>>('/v1/items/stock', { query: { id: ids, limit: 500 }, signal }).then((answer) =>
            Object.fromEntries(answer.body.data.map((row) => [row.item_id, row])),
          )
        : Promise.resolve({} as Record<number, Stock>),
    [ids, readsStock],
  );
  const stockOf = (item: Item) => stock.data?.[item.id];
  const columns: Column<Item>[] = [
    { label: 'Id', render: (item) => item.id, numeric: true, optional: true },
    { label: 'Name', render: (item) => <a href={href('items', item.id)}>{item.name}</a> },
    { label: 'SKU', render: (item) => <code>{item.sku}</code> },
    { label: 'Price', render: (item) => item.price, numeric: true },
  ];
  if (readsStock)
    columns.push(
      { label: 'On hand', render: (item) => count(stockOf(item)?.quantity), numeric: true },
      { label: 'Reserved', render: (item) => count(stockOf(item)?.reserved), numeric: true, optional: true },
    );
  columns.push({ label: 'Last changed', render: (item) => <Time at={item.updated_at} />, optional: true });
  return (
    <>
      <Header title="Items and stock">
        {can('items:create') && !creating ? (
          <button type="button" onClick={() => setCreating(true)}>
            New item
          </button>
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      {creating ? (
        <CreateForm
          title="New item"
          fields={ITEM_FIELDS}
          onClose={() => setCreating(false)}
          create={async (body) => {
            const created = await call<Item>('/v1/items', { method: 'POST', body });
            setFlash('Item created.');
            navigate(href('items', created.body.id));
          }}
        />
      ) : null}
      <FilterForm section="items" params={params} filters={ITEM_FILTERS} label="Filter items" />
      <ProblemView error={stock.error} context="Could not read the stock of these items" />
      <PagedTable paged={paged} caption="Items" columns={columns} rowKey={(item) => item.id} empty="No item matches." />
    </>
  );
}

function ItemRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('items', id);
  const item = useRecord<Item>(path);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, item.etag, 'items', `Item #${id} deleted.`);
  // Setting the stock makes a movement: the list of movements reads again.
  const [stockRound, setStockRound] = useState(0);
  const record = item.record;
  return (
    <>
      <BackLink section="items" label="Items and stock" />
      <Header title={record?.name ?? `Item #${id}`}>
        {record && can('items:update') && !editing ? (
          <button
            type="button"
            onClick={() => {
              setEditing(true);
              setNotice(undefined);
            }}
          >
            Change
          </button>
        ) : null}
        {record && can('items:delete') ? (
          <ConfirmButton
            key="Delete"
            label="Delete"
            confirm="Delete this item and its stock?"
            disabled={remove.busy}
            onConfirm={() => void remove.run()}
          />
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      <WriteProblem
        error={remove.error}
        context="Not deleted"
        onReload={() => {
          remove.clear();
          item.reload();
        }}
      />
      {record === undefined ? (
        <NotLoaded
          error={item.error}
          loading={item.loading}
          what={`item #${id}`}
          section="items"
          listLabel="Items and stock"
        />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={item.etag}
              title="Change item"
              record={record}
              fields={ITEM_FIELDS}
              save={(patch) => call<Item>(path, { method: 'PATCH', body: patch, ifMatch: item.etag })}
              onSaved={(answer) => {
                item.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={item.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="Item">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Name</dt>
              <dd>{record.name}</dd>
              <dt>SKU</dt>
              <dd>
                <code>{record.sku}</code>
              </dd>
              <dt>Price</dt>
              <dd>{record.price}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          {can('stock:read') ? (
            <>
              <StockPanel itemId={record.id} onSet={() => setStockRound((round) => round + 1)} />
              <Movements itemId={record.id} round={stockRound} />
            </>
          ) : null}
        </>
      )}
    </>
  );
}

/** An item's stock (its own record and ETag), and setting its on-hand quantity (PUT with If-Match). */
function StockPanel({ itemId, onSet }: { itemId: number; onSet: () => void }): JSX.Element {
  const can = useCan();
  const path = `/v1/items/${itemId}/stock`;
  const stock = useRecord<Stock>(path);
  const [quantity, setQuantity] = useState('');
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const save = useAction(async (value: number) => {
    const answer = await call<Stock>(path, { method: 'PUT', body: { quantity: value }, ifMatch: stock.etag });
    stock.replace(answer);
    setQuantity('');
    setNotice(`On hand set to ${count(answer.body.quantity)}.`);
    onSet();
  });
  const record = stock.record;
  return (
    <Section title="Stock">
      <ProblemView error={stock.error} context="Could not read the stock" />
      {record === undefined ? (
        stock.loading ? (
          <p>Loading…</p>
        ) : null
      ) : (
        <>
          <div class="grid">
            <Stat label="On hand" value={count(record.quantity)} note="Units free to order" />
            <Stat label="Reserved" value={count(record.reserved)} note="Held by placed orders" />
            <Stat
              label="In the warehouse"
              value={count(record.quantity + record.reserved)}
              note="On hand and reserved"
            />
          </div>
          <p class="stat-note">
            Last changed <Time at={record.updated_at} />
          </p>
          {can('stock:update') ? (
            <form
              class="form-row records-stock-form"
              onSubmit={(event) => {
                event.preventDefault();
                setNotice(undefined);
                void save.run(Number(quantity));
              }}
            >
              <Field label="Set on hand to" hint="Units counted, 0 or more; replaces the quantity on hand">
                <input
                  type="number"
                  name="quantity"
                  min={0}
                  step={1}
                  required
                  inputMode="numeric"
                  value={quantity}
                  onInput={(event) => setQuantity(event.currentTarget.value)}
                />
              </Field>
              <button type="submit" class="primary" disabled={save.busy}>
                {save.busy ? 'Setting…' : 'Set stock'}
              </button>
            </form>
          ) : null}
          <Notice>{notice}</Notice>
          <WriteProblem
            error={save.error}
            context="Stock not set"
            onReload={() => {
              save.clear();
              stock.reload();
            }}
          />
        </>
      )}
    </Section>
  );
}

function Stat({ label, value, note }: { label: string; value: ComponentChildren; note?: string }): JSX.Element {
  return (
    <div class="stat">
      <p class="stat-label">{label}</p>
      <p class="stat-value">{value}</p>
      {note ? <p class="stat-note">{note}</p> : null}
    </div>
  );
}

const MOVEMENT_KINDS: Record<Movement['kind'], { label: string; tone: 'good' | 'bad' | 'warn' | 'neutral' }> = {
  set: { label: 'set', tone: 'neutral' },
  reserve: { label: 'reserved', tone: 'warn' },
  release: { label: 'released', tone: 'good' },
  fulfil: { label: 'fulfilled', tone: 'neutral' },
};

function signed(value: number): string {
  return value > 0 ? `+${count(value)}` : value < 0 ? `−${count(-value)}` : '0';
}

function Movements({ itemId, round }: { itemId: number; round: number }): JSX.Element {
  const [kind, setKind] = useState('');
  const paged = usePaged<Movement>(
    `/v1/items/${itemId}/stock/movements`,
    { kind: kind || undefined, sort: '-id', limit: 20 },
    [round],
  );
  const can = useCan();
  const columns: Column<Movement>[] = [
    { label: 'When', render: (movement) => <Time at={movement.created_at} /> },
    {
      label: 'Kind',
      render: (movement) => (
        <span class="records-nowrap">
          <Badge tone={MOVEMENT_KINDS[movement.kind].tone}>{MOVEMENT_KINDS[movement.kind].label}</Badge>
        </span>
      ),
    },
    { label: 'Change', render: (movement) => signed(movement.quantity_change), numeric: true },
    { label: 'On hand', render: (movement) => count(movement.quantity_after), numeric: true },
    { label: 'Reserved change', render: (movement) => signed(movement.reserved_change), numeric: true, optional: true },
    { label: 'Reserved', render: (movement) => count(movement.reserved_after), numeric: true, optional: true },
    {
      label: 'Order',
      render: (movement) =>
        movement.order_id === null ? (
          '—'
        ) : can('orders:read') ? (
          <a href={href('orders', movement.order_id)}>order #{movement.order_id}</a>
        ) : (
          `order #${movement.order_id}`
        ),
    },
  ];
  return (
    <Section title="Stock movements">
      <div class="filters">
        <Field label="Kind">
          <select name="kind" value={kind} onChange={(event) => setKind(event.currentTarget.value)}>
            <option value="">All</option>
            <option value="set">Set by a count</option>
            <option value="reserve">Reserved by an order</option>
            <option value="release">Released by an order</option>
            <option value="fulfil">Left with a fulfilled order</option>
          </select>
        </Field>
      </div>
      <PagedTable
        paged={paged}
        caption="Stock movements"
        columns={columns}
        rowKey={(movement) => movement.id}
        empty="No movement of this item's stock yet."
      />
    </Section>
  );
}

/* ------------------------------------------------------------------------------------------ */
/* Orders                                                                                       */
/* ------------------------------------------------------------------------------------------ */

const STATUS_TONES: Record<OrderStatus, 'good' | 'bad' | 'warn' | 'neutral'> = {
  placed: 'warn',
  fulfilled: 'good',
  cancelled: 'neutral',
};

function StatusBadge({ status }: { status: OrderStatus }): JSX.Element {
  return (
    <span class="records-nowrap">
      <Badge tone={STATUS_TONES[status] ?? 'neutral'}>{status}</Badge>
    </span>
  );
}

const ORDER_FILTERS: FilterSpec[] = [
  {
    name: 'status',
    label: 'Status',
    kind: 'select',
    options: [
      ['', 'Any'],
      ['placed', 'Placed'],
      ['fulfilled', 'Fulfilled'],
      ['cancelled', 'Cancelled'],
    ],
  },
  { name: 'user_id', label: 'User id', kind: 'id' },
  { name: 'created_by', label: 'Created by caller', kind: 'id', more: true },
  { name: 'created_after', label: 'Created after', kind: 'datetime', more: true },
  { name: 'created_before', label: 'Created before', kind: 'datetime', more: true },
  {
    name: 'sort',
    label: 'Sort by',
    kind: 'select',
    options: [
      ['', 'Oldest first'],
      ['-id', 'Newest first'],
      ['-total', 'Total, highest first'],
      ['total', 'Total, lowest first'],
      ['-updated_at', 'Last changed first'],
    ],
  },
];

const ORDER_FIELDS: EditSpec[] = [
  { name: 'name', label: 'Reference', kind: 'text', maxLength: 200, hint: "The caller's reference, 1–200 characters" },
  { name: 'user_id', label: 'User id', kind: 'id', hint: 'The user the order is for' },
];

function UserRef({ order }: { order: Order }): JSX.Element {
  const can = useCan();
  if (order.user_id === null) return <span>none (the user was deleted)</span>;
  const name = order.user?.name;
  const text = name ?? `user #${order.user_id}`;
  return can('users:read') ? <a href={href('users', order.user_id)}>{text}</a> : <span>{text}</span>;
}

function orderColumns(withUser: boolean): Column<Order>[] {
  const columns: Column<Order>[] = [
    { label: 'Id', render: (order) => order.id, numeric: true, optional: true },
    { label: 'Reference', render: (order) => <a href={href('orders', order.id)}>{order.name}</a> },
  ];
  if (withUser) columns.push({ label: 'User', render: (order) => <UserRef order={order} /> });
  columns.push(
    { label: 'Status', render: (order) => <StatusBadge status={order.status} /> },
    { label: 'Lines', render: (order) => count(order.lines.length), numeric: true, optional: true },
    { label: 'Total', render: (order) => order.total, numeric: true },
    { label: 'Created', render: (order) => <Time at={order.created_at} />, optional: true },
  );
  return columns;
}

/**
 * An order's lines, changed as a whole (PATCH {lines}, with If-Match): the quantity of a line, a
 * line added or removed. Only while the order is placed; rowi checks the stock and says which
 * lines are short.
 */
function LinesForm({
  order,
  items,
  save,
  onSaved,
  onReload,
  onClose,
}: {
  order: Order;
  items: Record<number, Item> | undefined;
  save: (lines: { item_id: number; quantity: number }[]) => Promise<Answer<Order>>;
  onSaved: (answer: Answer<Order>) => void;
  onReload: () => void;
  onClose: () => void;
}): JSX.Element {
  const [lines, setLines] = useState(() =>
    order.lines.map((line) => ({ item_id: String(line.item_id), quantity: String(line.quantity) })),
  );
  const action = useAction(save);
  const change = (index: number, name: 'item_id' | 'quantity', value: string) =>
    setLines((previous) => previous.map((line, at) => (at === index ? { ...line, [name]: value } : line)));
  return (
    <form
      class="form records-lines-form"
      aria-label="Change lines"
      onSubmit={async (event) => {
        event.preventDefault();
        const answer = await action.run(
          lines.map((line) => ({ item_id: Number(line.item_id), quantity: Number(line.quantity) })),
        );
        if (answer !== undefined) onSaved(answer);
      }}
    >
      {lines.map((line, index) => {
        const known = items?.[Number(line.item_id)];
        return (
          <fieldset class="records-line" key={index}>
            <legend class="visually-hidden">Line {index + 1}</legend>
            <Field label="Item id" hint={known ? known.name : undefined}>
              <input
                type="number"
                name="item_id"
                min={1}
                step={1}
                required
                inputMode="numeric"
                class="records-id-input"
                value={line.item_id}
                onInput={(event) => change(index, 'item_id', event.currentTarget.value)}
              />
            </Field>
            <Field label="Quantity">
              <input
                type="number"
                name="quantity"
                min={1}
                max={1000000}
                step={1}
                required
                inputMode="numeric"
                class="records-id-input"
                value={line.quantity}
                onInput={(event) => change(index, 'quantity', event.currentTarget.value)}
              />
            </Field>
            <button
              type="button"
              disabled={lines.length === 1}
              aria-label={`Remove line ${index + 1}`}
              onClick={() => setLines((previous) => previous.filter((_, at) => at !== index))}
            >
              Remove
            </button>
          </fieldset>
        );
      })}
      <WriteProblem error={action.error} context="Lines not saved" onReload={onReload} />
      <div class="actions">
        <button type="button" onClick={() => setLines((previous) => [...previous, { item_id: '', quantity: '1' }])}>
          Add a line
        </button>
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Saving…' : 'Save lines'}
        </button>
        <button type="button" onClick={onClose}>
          Close without saving
        </button>
      </div>
    </form>
  );
}

export function OrdersView({ parts, params }: ViewProps): JSX.Element {
  return (
    <div class="records-view">
      {parts[0] === undefined ? <OrderList params={params} /> : <OrderRecord id={parts[0]} />}
    </div>
  );
}

function OrderList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const [notice] = useState(takeFlash);
  const query = listQuery(
    params,
    ORDER_FILTERS.map((filter) => filter.name),
  );
  // The user's name beside each order, in the same call, when the key may read users.
  if (can('users:read')) query.expand = 'user';
  const paged = usePaged<Order>('/v1/orders', query);
  return (
    <>
      <Header title="Orders" />
      <Notice>{notice}</Notice>
      <FilterForm section="orders" params={params} filters={ORDER_FILTERS} label="Filter orders" />
      <PagedTable
        paged={paged}
        caption="Orders"
        columns={orderColumns(true)}
        rowKey={(order) => order.id}
        empty="No order matches."
      />
    </>
  );
}

function OrderRecord({ id }: { id: string }): JSX.Element {
  const can = useCan();
  const path = recordPath('orders', id);
  // Read without expand: an expanded answer's ETag is weak, and If-Match needs the record's own.
  const order = useRecord<Order>(path);
  const [editing, setEditing] = useState(false);
  const [editingLines, setEditingLines] = useState(false);
  const [notice, setNotice] = useState<string | undefined>(takeFlash);
  const remove = useDelete(path, order.etag, 'orders', `Order #${id} deleted.`);
  const transition = useAction(async (to: 'cancelled' | 'fulfilled') => {
    const answer =
      to === 'cancelled'
        ? await call<Order>(`${path}/cancel`, { method: 'POST', ifMatch: order.etag })
        : await call<Order>(path, { method: 'PATCH', body: { status: 'fulfilled' }, ifMatch: order.etag });
    order.replace(answer);
    setNotice(to === 'cancelled' ? 'Order cancelled: its reserved stock returned.' : 'Order fulfilled.');
  });
  const record = order.record;
  const placed = record?.status === 'placed';

  // The names of the user and the items, each read once, when the key may read them.
  const userId = record?.user_id ?? null;
  const user = useLoad(
    (signal) =>
      userId !== null && can('users:read')
        ? call<User>(`/v1/users/${userId}`, { signal }).then(
            (answer) => answer.body,
            () => undefined,
          )
        : Promise.resolve(undefined),
    [userId],
  );
  const itemIds = [...new Set(record?.lines.map((line) => line.item_id) ?? [])].join(',');
  const items = useLoad(
    (signal) =>
      itemIds !== '' && can('items:read')
        ? call<Page<Item>>('/v1/items', { query: { id: itemIds, limit: 500 }, signal }).then((answer) =>
            Object.fromEntries(answer.body.data.map((item) => [item.id, item])),
          )
        : Promise.resolve({} as Record<number, Item>),
    [itemIds],
  );
  const lineColumns: Column<OrderLine>[] = [
    {
      label: 'Item',
      render: (line) => {
        const item = items.data?.[line.item_id];
        const text = item ? item.name : `item #${line.item_id}`;
        return (
          <>
            {can('items:read') ? <a href={href('items', line.item_id)}>{text}</a> : text}
            {item ? (
              <>
                {' '}
                <code class="records-sku">{item.sku}</code>
              </>
            ) : null}
          </>
        );
      },
    },
    { label: 'Quantity', render: (line) => count(line.quantity), numeric: true },
    { label: 'Unit price', render: (line) => line.unit_price, numeric: true },
    { label: 'Line total', render: (line) => line.line_total, numeric: true },
  ];

  return (
    <>
      <BackLink section="orders" label="Orders" />
      <Header title={record?.name ?? `Order #${id}`}>
        {record && placed && can('orders:update') ? (
          <ConfirmButton
            key="Mark fulfilled"
            label="Mark fulfilled"
            confirm="Mark this order fulfilled? Its reserved stock leaves the inventory."
            danger={false}
            disabled={transition.busy}
            onConfirm={() => {
              setNotice(undefined);
              void transition.run('fulfilled');
            }}
          />
        ) : null}
        {record && placed && can('orders:cancel') ? (
          <ConfirmButton
            key="Cancel order"
            label="Cancel order"
            confirm="Cancel this order? Its reserved stock returns."
            disabled={transition.busy}
            onConfirm={() => {
              setNotice(undefined);
              void transition.run('cancelled');
            }}
          />
        ) : null}
        {record && can('orders:update') && !editing ? (
          <button
            type="button"
            onClick={() => {
              setEditing(true);
              setNotice(undefined);
            }}
          >
            Change
          </button>
        ) : null}
        {record && can('orders:delete') ? (
          <ConfirmButton
            key="Delete"
            label="Delete"
            confirm="Delete this order?"
            disabled={remove.busy}
            onConfirm={() => void remove.run()}
          />
        ) : null}
      </Header>
      <Notice>{notice}</Notice>
      <WriteProblem
        error={transition.error}
        context="The order's status was not changed"
        onReload={() => {
          transition.clear();
          order.reload();
        }}
      />
      <WriteProblem
        error={remove.error}
        context="Not deleted"
        onReload={() => {
          remove.clear();
          order.reload();
        }}
      />
      {record === undefined ? (
        <NotLoaded
          error={order.error}
          loading={order.loading}
          what={`order #${id}`}
          section="orders"
          listLabel="Orders"
        />
      ) : (
        <>
          {editing ? (
            <ChangeForm
              key={order.etag}
              title="Change order"
              record={record}
              fields={placed ? ORDER_FIELDS : ORDER_FIELDS.filter((field) => field.name === 'name')}
              save={(patch) => call<Order>(path, { method: 'PATCH', body: patch, ifMatch: order.etag })}
              onSaved={(answer) => {
                order.replace(answer);
                setEditing(false);
                setNotice('Changes saved.');
              }}
              onReload={order.reload}
              onClose={() => setEditing(false)}
            />
          ) : null}
          <Section title="Order">
            <dl class="record">
              <dt>Id</dt>
              <dd>{record.id}</dd>
              <dt>Reference</dt>
              <dd>{record.name}</dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge status={record.status} />
              </dd>
              <dt>User</dt>
              <dd>
                <UserRef order={{ ...record, user: user.data }} />
                {user.data ? <span class="records-muted"> {user.data.email}</span> : null}
              </dd>
              <dt>Total</dt>
              <dd class="records-total">{record.total}</dd>
              <Provenance record={record} />
            </dl>
          </Section>
          <Section title="Lines">
            <ProblemView error={items.error} context="Could not read the items' names" />
            <Table
              caption="Lines"
              columns={lineColumns}
              rows={record.lines}
              rowKey={(line) => line.item_id}
              empty="No lines."
            />
            <p class="records-sum">
              <span>
                {count(record.lines.length)} {record.lines.length === 1 ? 'line' : 'lines'},{' '}
                {count(record.lines.reduce((sum, line) => sum + line.quantity, 0))} units
              </span>
              <span>
                Total <strong>{record.total}</strong>
              </span>
            </p>
            {placed && can('orders:update') && !editingLines ? (
              <button
                type="button"
                onClick={() => {
                  setEditingLines(true);
                  setNotice(undefined);
                }}
              >
                Change lines
              </button>
            ) : null}
            {editingLines && placed ? (
              <LinesForm
                key={order.etag}
                order={record}
                items={items.data}
                save={(lines) => call<Order>(path, { method: 'PATCH', body: { lines }, ifMatch: order.etag })}
                onSaved={(answer) => {
                  order.replace(answer);
                  setEditingLines(false);
                  setNotice(`Lines saved: the total is now ${answer.body.total}.`);
                }}
                onReload={order.reload}
                onClose={() => setEditingLines(false)}
              />
            ) : null}
          </Section>
        </>
      )}
    </>
  );
}
