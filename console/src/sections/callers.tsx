/**
 * Callers and keys (docs/security.md, docs/access.md): the callers, each one's role, grants and
 * record access, and its API keys. A new key is shown once, in this view's memory only, until the
 * operator dismisses it or leaves the page; rowi never shows it again.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, get } from '../api.js';
import { useCan } from '../identity.js';
import { href, navigate, type ViewProps } from '../router.js';
import {
  Badge,
  ConfirmButton,
  CopyButton,
  Field,
  Header,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Time,
  useAction,
  useLoad,
  usePaged,
  type Column,
} from '../ui.js';
import './callers.css';

type Access = 'all' | 'own';

/** A caller as rowi shows it (the Caller schema). */
interface Caller {
  id: number;
  name: string;
  role: string;
  extra_scopes: string[];
  removed_scopes: string[];
  scopes: string[];
  record_access: Record<string, Access>;
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
}

/** An API key's record (the ApiKey schema): never the key itself. */
interface ApiKey {
  id: number;
  caller_id: number;
  prefix: string;
  description: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** The answer to issuing a key: the one time the key is shown. */
interface NewApiKey extends ApiKey {
  key: string;
}

export function CallersView({ parts, params }: ViewProps): JSX.Element {
  const [first] = parts;
  if (first === undefined) return <CallerList params={params} />;
  if (first === 'new') return <NewCaller />;
  const id = Number(first);
  if (!Number.isSafeInteger(id) || id < 1 || parts.length > 1)
    return (
      <>
        <Header title="Not here" />
        <p>
          There is no such page of callers. <a href={href('callers')}>All callers</a>.
        </p>
      </>
    );
  return <CallerPage key={id} id={id} created={params.has('created')} />;
}

// ---------------------------------------------------------------------------------------------
// What the API says a caller may be: its roles, scopes and owned resources, from the public
// OpenAPI document (the Caller schemas' enumerations), read once per page load.

interface Catalogue {
  roles: { name: string; hint: string }[];
  scopes: string[];
  /** Resources whose records have an owner: record access is all or own for each. */
  owned: string[];
}

type Schema = {
  $ref?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  description?: string;
};

let catalogue: Promise<Catalogue> | undefined;

function loadCatalogue(): Promise<Catalogue> {
  catalogue ??= get<{ components?: { schemas?: Record<string, Schema> } }>('/v1/openapi.json').then((document) => {
    const schemas = document.components?.schemas ?? {};
    const resolve = (schema: Schema | undefined): Schema | undefined => {
      let current = schema;
      for (let depth = 0; current?.$ref !== undefined && depth < 10; depth += 1)
        current = schemas[current.$ref.slice(current.$ref.lastIndexOf('/') + 1)];
      return current;
    };
    const literals = (schema: Schema | undefined): string[] => {
      const resolved = resolve(schema);
      if (resolved === undefined) return [];
      if (resolved.enum) return resolved.enum.map(String);
      if (resolved.const !== undefined) return [String(resolved.const)];
      return [...(resolved.anyOf ?? []), ...(resolved.oneOf ?? [])].flatMap(literals);
    };
    const caller = resolve(schemas.Caller)?.properties ?? {};
    const role = resolve(caller.role);
    const roleNames = literals(role);
    const scopes = literals(resolve(caller.extra_scopes)?.items);
    const owned = Object.keys(resolve(caller.record_access)?.properties ?? {});
    if (roleNames.length === 0 || scopes.length === 0)
      throw new Error('The API description names no roles or scopes for callers.');
    return {
      roles: roleNames.map((name) => ({ name, hint: roleHint(role?.description ?? '', name, roleNames) })),
      scopes,
      owned,
      extraHint: resolve(caller.extra_scopes)?.description ?? '',
    };
  });
  catalogue.catch(() => (catalogue = undefined));
  return catalogue;
}

/** The part of the role's description about `name` ("reader: read everything; editor: …"). */
function roleHint(description: string, name: string, names: string[]): string {
  const start = description.indexOf(`${name}: `);
  if (start < 0) return '';
  const rest = description.slice(start + name.length + 2);
  const ends = names
    .map((other) => rest.indexOf(`; ${other}: `))
    .filter((index) => index >= 0)
    .sort((a, b) => a - b);
  return rest.slice(0, ends[0] ?? rest.length);
}

/** Caller management (callers:*) comes only with the admin role: it cannot be an extra scope. */
const grantable = (scope: string) => !scope.startsWith('callers:');

/** Scopes grouped by their resource, in the document's order. */
function byResource(scopes: string[]): [string, string[]][] {
  const groups = new Map<string, string[]>();
  for (const scope of scopes) {
    const resource = scope.slice(0, scope.indexOf(':'));
    groups.set(resource, [...(groups.get(resource) ?? []), scope]);
  }
  return [...groups];
}

// ---------------------------------------------------------------------------------------------
// Shared words

function accessSummary(access: Record<string, Access>): string {
  const own = Object.entries(access)
    .filter(([, value]) => value === 'own')
    .map(([resource]) => resource);
  if (own.length === 0) return 'all records';
  return `its own ${own.join(', ')}; all else`;
}

/** A problem of this section, with what rowi's rule means where the frame does not say. */
function CallerProblem({ error, context }: { error: unknown; context: string }): JSX.Element | null {
  if (error === undefined) return null;
  return (
    <>
      <ProblemView error={error} context={context} />
      {error instanceof ApiError && error.kind === 'last-admin' ? (
        <p class="callers-explained">
          rowi always keeps one caller that can manage callers: an admin that holds callers:read and callers:update and
          has a working key. Make another caller an admin and issue it a key first; then this change can be made.
        </p>
      ) : null}
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// The list

const LIST_COLUMNS: Column<Caller>[] = [
  { label: 'Name', render: (caller) => <a href={href('callers', caller.id)}>{caller.name}</a> },
  {
    label: 'Role',
    render: (caller) => <Badge tone={caller.role === 'admin' ? 'warn' : 'neutral'}>{caller.role}</Badge>,
  },
  { label: 'Record access', render: (caller) => accessSummary(caller.record_access) },
  {
    label: 'Grants',
    optional: true,
    render: (caller) =>
      caller.extra_scopes.length === 0 && caller.removed_scopes.length === 0
        ? 'the role’s'
        : [
            caller.extra_scopes.length > 0 ? `+${caller.extra_scopes.length} extra` : '',
            caller.removed_scopes.length > 0 ? `−${caller.removed_scopes.length} removed` : '',
          ]
            .filter(Boolean)
            .join(', '),
  },
  { label: 'Scopes', numeric: true, optional: true, render: (caller) => caller.scopes.length },
  { label: 'Created', optional: true, render: (caller) => <Time at={caller.created_at} /> },
];

function CallerList({ params }: { params: URLSearchParams }): JSX.Element {
  const can = useCan();
  const role = params.get('role') ?? '';
  const deleted = params.get('deleted');
  const roles = useLoad(() => loadCatalogue().then((found) => found.roles.map((entry) => entry.name)), []);
  const paged = usePaged<Caller>('/v1/callers', { limit: 25, role: role || undefined });
  return (
    <>
      <Header title="Callers and keys">
        {can('callers:create') ? (
          <a class="button primary" href={href('callers', 'new')}>
            New caller
          </a>
        ) : null}
      </Header>
      <p class="stat-note callers-intro">
        A caller is a system that uses the API; its role and grants say what it may do, its record access which records
        it sees. Open one to change it or to manage its keys.
      </p>
      {deleted ? <Notice>Caller #{deleted} was deleted, with its keys. Its audit events stay.</Notice> : null}
      <div class="filters">
        <Field label="Role">
          <select value={role} onChange={(event) => navigate(href('callers', { role: event.currentTarget.value }))}>
            <option value="">every role</option>
            {(roles.data ?? (role ? [role] : [])).map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <div class="callers-list">
        <PagedTable
          paged={paged}
          caption="Callers"
          columns={LIST_COLUMNS}
          rowKey={(caller) => caller.id}
          empty={role ? `No caller has the role ${role}.` : 'No callers.'}
        />
      </div>
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// The form of a caller: creating one, or changing one

type AccessChoice = 'default' | Access;

interface FormState {
  name: string;
  role: string;
  extra: string[];
  removed: string[];
  access: Record<string, AccessChoice>;
  rateLimit: string;
}

/** The request body the form's state makes: for a change, only what differs from `before`. */
function bodyOf(state: FormState, before: Caller | undefined): Record<string, unknown> {
  const rateLimit = state.rateLimit.trim() === '' ? null : Number(state.rateLimit);
  const chosen = Object.fromEntries(Object.entries(state.access).filter(([, value]) => value !== 'default'));
  if (before === undefined) {
    const body: Record<string, unknown> = { name: state.name.trim(), role: state.role };
    if (state.extra.length > 0) body.extra_scopes = state.extra;
    if (state.removed.length > 0) body.removed_scopes = state.removed;
    if (Object.keys(chosen).length > 0) body.record_access = chosen;
    if (rateLimit !== null) body.rate_limit = rateLimit;
    return body;
  }
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((scope) => b.includes(scope));
  const body: Record<string, unknown> = {};
  if (state.name.trim() !== before.name) body.name = state.name.trim();
  if (state.role !== before.role) body.role = state.role;
  if (!same(state.extra, before.extra_scopes)) body.extra_scopes = state.extra;
  if (!same(state.removed, before.removed_scopes)) body.removed_scopes = state.removed;
  if (
    Object.keys(chosen).length > 0 &&
    (body.role !== undefined ||
      Object.entries(chosen).some(([resource, value]) => before.record_access[resource] !== value))
  )
    body.record_access = chosen;
  if (rateLimit !== before.rate_limit) body.rate_limit = rateLimit;
  return body;
}

function CallerForm({
  catalogue: known,
  before,
  submitLabel,
  onSubmit,
  onReload,
}: {
  catalogue: Catalogue;
  before?: Caller;
  submitLabel: string;
  onSubmit: (body: Record<string, unknown>) => Promise<unknown>;
  /** Reads the caller again (after a 412: someone changed it meanwhile). */
  onReload?: () => void;
}): JSX.Element {
  const [state, setState] = useState<FormState>(() => ({
    name: before?.name ?? '',
    role: before?.role ?? known.roles.find((entry) => entry.name === 'reader')?.name ?? known.roles[0]!.name,
    extra: before?.extra_scopes ?? [],
    removed: before?.removed_scopes ?? [],
    access: Object.fromEntries(known.owned.map((resource) => [resource, before?.record_access[resource] ?? 'default'])),
    rateLimit: before?.rate_limit === null || before?.rate_limit === undefined ? '' : String(before.rate_limit),
  }));
  const [unchanged, setUnchanged] = useState(false);
  const action = useAction(onSubmit);
  const set = (change: Partial<FormState>) => {
    setUnchanged(false);
    setState((previous) => ({ ...previous, ...change }));
  };
  const roleHint = known.roles.find((entry) => entry.name === state.role)?.hint;
  const prefix = before ? `caller-${before.id}` : 'new-caller';

  const submit = async (event: Event) => {
    event.preventDefault();
    const body = bodyOf(state, before);
    if (Object.keys(body).length === 0) {
      setUnchanged(true);
      return;
    }
    await action.run(body);
  };

  return (
    <form class="form callers-form" onSubmit={submit} aria-label={before ? 'Change the caller' : 'New caller'}>
      <div class="form-row">
        <Field label="Name" hint="Lower-case letters, digits, dots, hyphens, underscores; also its OAuth client id.">
          <input
            name="name"
            required
            maxLength={64}
            pattern="[a-z0-9][a-z0-9._\-]*"
            autocomplete="off"
            spellcheck={false}
            value={state.name}
            onInput={(event) => set({ name: event.currentTarget.value })}
          />
        </Field>
        <Field label="Role" hint={roleHint}>
          <select
            name="role"
            value={state.role}
            onChange={(event) => {
              const role = event.currentTarget.value;
              // A new role brings its own record access unless one is chosen again here.
              set(
                before && role !== before.role
                  ? {
                      role,
                      access: Object.fromEntries(known.owned.map((resource) => [resource, 'default' as AccessChoice])),
                    }
                  : { role },
              );
            }}
          >
            {known.roles.map((entry) => (
              <option key={entry.name} value={entry.name}>
                {entry.name}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Rate limit" hint="Requests a minute; empty: the role’s default.">
          <input
            name="rate_limit"
            type="number"
            min={1}
            max={1_000_000_000}
            step={1}
            inputMode="numeric"
            value={state.rateLimit}
            onInput={(event) => set({ rateLimit: event.currentTarget.value })}
          />
        </Field>
      </div>
      {known.owned.length > 0 ? (
        <fieldset class="callers-fieldset">
          <legend>Record access</legend>
          <p class="field-hint">
            Per resource, whether the caller sees every record or only those it created. The role’s default: own users
            and orders for a channel, all for the other roles.
          </p>
          <div class="form-row">
            {known.owned.map((resource) => (
              <Field key={resource} label={resource}>
                <select
                  name={`access-${resource}`}
                  value={state.access[resource]}
                  onChange={(event) =>
                    set({ access: { ...state.access, [resource]: event.currentTarget.value as AccessChoice } })
                  }
                >
                  <option value="default">the role’s default</option>
                  <option value="all">all records</option>
                  <option value="own">only its own</option>
                </select>
              </Field>
            ))}
          </div>
        </fieldset>
      ) : null}
      <ScopeChoice
        id={`${prefix}-extra`}
        legend="Extra scopes"
        hint="Granted beyond the role’s. Caller management (callers:*) comes only with the admin role, so it is not offered here."
        scopes={known.scopes.filter(grantable)}
        chosen={state.extra}
        onChange={(extra) => set({ extra })}
      />
      <ScopeChoice
        id={`${prefix}-removed`}
        legend="Removed scopes"
        hint="Scopes of the role taken away."
        scopes={known.scopes}
        chosen={state.removed}
        onChange={(removed) => set({ removed })}
      />
      <CallerProblem error={action.error} context={before ? 'The caller was not changed' : 'No caller was created'} />
      {unchanged ? <Notice>Nothing to change: the form says what the caller is already.</Notice> : null}
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Saving…' : submitLabel}
        </button>
        {onReload && action.error instanceof ApiError && action.error.kind === 'precondition-failed' ? (
          <button type="button" onClick={onReload}>
            Read the caller again
          </button>
        ) : null}
      </div>
    </form>
  );
}

/** A list of scopes to tick, folded away until opened; its summary says what is ticked. */
function ScopeChoice({
  id,
  legend,
  hint,
  scopes,
  chosen,
  onChange,
}: {
  id: string;
  legend: string;
  hint: string;
  scopes: string[];
  chosen: string[];
  onChange: (chosen: string[]) => void;
}): JSX.Element {
  const [open, setOpen] = useState(chosen.length > 0);
  return (
    <details class="callers-scopes" open={open} onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary>
        {legend}: {chosen.length === 0 ? 'none' : chosen.join(', ')}
      </summary>
      <fieldset class="callers-fieldset" aria-describedby={`${id}-hint`}>
        <legend class="visually-hidden">{legend}</legend>
        <p class="field-hint" id={`${id}-hint`}>
          {hint}
        </p>
        <div class="callers-groups">
          {byResource(scopes).map(([resource, group]) => (
            <div class="callers-group" key={resource} role="group" aria-label={`${legend}: ${resource}`}>
              {group.map((scope) => (
                <label key={scope} class="callers-check">
                  <input
                    type="checkbox"
                    name={`${id}-${scope}`}
                    checked={chosen.includes(scope)}
                    onChange={(event) =>
                      onChange(
                        event.currentTarget.checked
                          ? scopes.filter((one) => one === scope || chosen.includes(one))
                          : chosen.filter((one) => one !== scope),
                      )
                    }
                  />{' '}
                  <code>{scope}</code>
                </label>
              ))}
            </div>
          ))}
        </div>
      </fieldset>
    </details>
  );
}

function NewCaller(): JSX.Element {
  const can = useCan();
  const known = useLoad(() => loadCatalogue(), []);
  return (
    <>
      <Header title="New caller" />
      <p>
        <a href={href('callers')}>All callers</a>
      </p>
      {!can('callers:create') ? (
        <p>The key you signed in with may not create callers (scope callers:create).</p>
      ) : (
        <Section title="The caller">
          <p class="stat-note callers-intro">Then issue it a key on its page: the key is shown there once.</p>
          <ProblemView error={known.error} context="Could not read the roles and scopes from the API description" />
          {known.data ? (
            <CallerForm
              catalogue={known.data}
              submitLabel="Create the caller"
              onSubmit={async (body) => {
                const created = await call<Caller>('/v1/callers', { method: 'POST', body });
                navigate(href('callers', created.body.id, { created: 1 }));
              }}
            />
          ) : known.loading ? (
            <p>Loading the roles and scopes…</p>
          ) : null}
        </Section>
      )}
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// One caller

function CallerPage({ id, created }: { id: number; created: boolean }): JSX.Element {
  const can = useCan();
  const loaded = useLoad((signal) => call<Caller>(`/v1/callers/${id}`, { signal }), [id]);
  const known = useLoad(() => loadCatalogue(), []);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const removal = useAction(async (etag: string | null) => {
    await call(`/v1/callers/${id}`, { method: 'DELETE', ifMatch: etag });
    navigate(href('callers', { deleted: id }));
  });
  const caller = loaded.data?.body;
  const etag = loaded.data?.etag ?? null;

  if (caller === undefined)
    return (
      <>
        <Header title={`Caller #${id}`} />
        <p>
          <a href={href('callers')}>All callers</a>
        </p>
        {loaded.loading ? (
          <p>Loading…</p>
        ) : (
          <ProblemView error={loaded.error} context={`Could not read caller #${id}`} />
        )}
      </>
    );

  return (
    <>
      <Header title={caller.name}>
        {can('callers:delete') ? (
          <ConfirmButton
            key="Delete caller"
            label="Delete caller"
            confirm="Delete this caller and all its keys?"
            disabled={removal.busy}
            onConfirm={() => void removal.run(etag)}
          />
        ) : null}
      </Header>
      <p>
        <a href={href('callers')}>All callers</a>
      </p>
      {created ? <Notice>Caller {caller.name} was created. Issue it a key below.</Notice> : null}
      <Notice>{saved}</Notice>
      <CallerProblem error={removal.error} context="The caller was not deleted" />
      <div class="callers-overview">
        <Section title="The caller">
          <dl class="record">
            <dt>Id</dt>
            <dd>{caller.id}</dd>
            <dt>Name</dt>
            <dd>{caller.name}</dd>
            <dt>Role</dt>
            <dd>{caller.role}</dd>
            <dt>Record access</dt>
            <dd>
              {Object.entries(caller.record_access)
                .map(([resource, access]) => `${resource}: ${access === 'all' ? 'all records' : 'its own only'}`)
                .join('; ') || 'no resource has owned records'}
            </dd>
            <dt>Extra scopes</dt>
            <dd>
              <ScopeList scopes={caller.extra_scopes} />
            </dd>
            <dt>Removed scopes</dt>
            <dd>
              <ScopeList scopes={caller.removed_scopes} />
            </dd>
            <dt>Rate limit</dt>
            <dd>
              {caller.rate_limit === null ? 'the role’s default' : `${caller.rate_limit.toLocaleString()} a minute`}
            </dd>
            <dt>Created</dt>
            <dd>
              <Time at={caller.created_at} />
            </dd>
            <dt>Changed</dt>
            <dd>
              <Time at={caller.updated_at} />
            </dd>
          </dl>
        </Section>
        <Section title={`Scopes it holds (${caller.scopes.length})`}>
          <p class="field-hint">Its role’s, plus the extra scopes, less the removed ones.</p>
          <ScopeList scopes={caller.scopes} />
        </Section>
      </div>
      <KeysPanel caller={caller} />
      {can('callers:update') ? (
        <Section title="Change the caller">
          <ProblemView error={known.error} context="Could not read the roles and scopes from the API description" />
          {known.data ? (
            <CallerForm
              key={etag ?? caller.updated_at}
              catalogue={known.data}
              before={caller}
              submitLabel="Save the changes"
              onSubmit={async (body) => {
                setSaved(undefined);
                await call<Caller>(`/v1/callers/${id}`, { method: 'PATCH', body, ifMatch: etag });
                setSaved(`Saved: ${Object.keys(body).join(', ').replaceAll('_', ' ')} changed.`);
                loaded.reload();
              }}
              onReload={() => {
                setSaved(undefined);
                loaded.reload();
              }}
            />
          ) : null}
        </Section>
      ) : null}
    </>
  );
}

function ScopeList({ scopes }: { scopes: string[] }): JSX.Element {
  if (scopes.length === 0) return <span>none</span>;
  return (
    <ul class="scopes">
      {scopes.map((scope) => (
        <li key={scope}>
          <code>{scope}</code>
        </li>
      ))}
    </ul>
  );
}

// ---------------------------------------------------------------------------------------------
// Its keys

function keyState(key: ApiKey): JSX.Element {
  if (key.revoked_at !== null) return <Badge tone="bad">revoked</Badge>;
  if (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()) return <Badge tone="warn">expired</Badge>;
  return <Badge tone="good">working</Badge>;
}

function KeysPanel({ caller }: { caller: Caller }): JSX.Element {
  const can = useCan();
  const keys = usePaged<ApiKey>(`/v1/callers/${caller.id}/keys`, { limit: 20, sort: '-id' });
  const [fresh, setFresh] = useState<NewApiKey | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [description, setDescription] = useState('');
  const [expires, setExpires] = useState('');
  const secretBox = useRef<HTMLDivElement>(null);

  const issue = useAction(async () => {
    setNotice(undefined);
    const body: Record<string, string> = {};
    if (description.trim() !== '') body.description = description.trim();
    if (expires !== '') {
      const at = new Date(expires);
      if (Number.isNaN(at.getTime())) throw new Error('The expiry is not a date and time.');
      body.expires_at = at.toISOString();
    }
    const answer = await call<NewApiKey>(`/v1/callers/${caller.id}/keys`, { method: 'POST', body });
    setFresh(answer.body);
    setDescription('');
    setExpires('');
    keys.reload();
  });
  const revoke = useAction(async (key: ApiKey) => {
    setNotice(undefined);
    await call(`/v1/callers/${caller.id}/keys/${key.id}`, { method: 'DELETE' });
    if (fresh?.id === key.id) setFresh(undefined);
    setNotice(`Key ${key.prefix} was revoked: rowi refuses it from now on.`);
    keys.reload();
  });

  useEffect(() => {
    if (fresh) secretBox.current?.focus();
  }, [fresh]);

  const columns: Column<ApiKey>[] = [
    { label: 'Prefix', render: (key) => <code>{key.prefix}</code> },
    { label: 'Description', render: (key) => key.description || '—' },
    { label: 'State', render: keyState },
    { label: 'Last used', render: (key) => (key.last_used_at === null ? 'never' : <Time at={key.last_used_at} />) },
    { label: 'Created', optional: true, render: (key) => <Time at={key.created_at} /> },
    {
      label: 'Expires',
      optional: true,
      render: (key) => (key.expires_at === null ? 'never' : <Time at={key.expires_at} />),
    },
    {
      label: 'Revoked',
      optional: true,
      render: (key) => (key.revoked_at === null ? '—' : <Time at={key.revoked_at} />),
    },
  ];
  if (can('callers:delete'))
    columns.push({
      label: 'Actions',
      render: (key) =>
        key.revoked_at === null ? (
          <ConfirmButton
            key="Revoke"
            label="Revoke"
            confirm={`Revoke key ${key.prefix}?`}
            disabled={revoke.busy}
            onConfirm={() => void revoke.run(key)}
          />
        ) : null,
    });

  return (
    <Section title="API keys">
      {fresh ? (
        <div class="secret callers-secret" role="region" aria-label="The new key" tabIndex={-1} ref={secretBox}>
          <p class="callers-warning">
            <strong>Copy it now: rowi does not show it again.</strong> It keeps only a hash; a lost key is revoked and
            replaced, never shown.
          </p>
          <p class="callers-key">
            New key {fresh.prefix}
            {fresh.description ? ` (${fresh.description})` : ''} for {caller.name}:{' '}
            <code aria-label="The new key's secret">{fresh.key}</code>
          </p>
          <div class="actions">
            <CopyButton text={fresh.key} label="Copy the key" />
            <button type="button" onClick={() => setFresh(undefined)}>
              I have copied it: hide it
            </button>
          </div>
        </div>
      ) : null}
      <Notice>{notice}</Notice>
      <CallerProblem error={revoke.error} context="The key was not revoked" />
      <div class="callers-keys-bar">
        <p class="field-hint">
          The keys themselves are never listed: rowi keeps only a hash. Last use is recorded within a few seconds.
        </p>
        <button type="button" onClick={keys.reload} disabled={keys.loading}>
          Refresh the keys
        </button>
      </div>
      <div class="callers-keys">
        <PagedTable
          paged={keys}
          caption={`Keys of ${caller.name}`}
          columns={columns}
          rowKey={(key) => key.id}
          empty="No keys: this caller cannot sign requests yet."
        />
      </div>
      {can('callers:create') ? (
        <form
          class="form callers-issue"
          aria-label="Issue a key"
          onSubmit={(event) => {
            event.preventDefault();
            void issue.run();
          }}
        >
          <h3>Issue a key</h3>
          <div class="form-row">
            <Field label="Description" hint="What the key is for (web-shop production); up to 200 characters.">
              <input
                name="description"
                maxLength={200}
                autocomplete="off"
                value={description}
                onInput={(event) => setDescription(event.currentTarget.value)}
              />
            </Field>
            <Field label="Expires" hint="Optional, in your time zone; empty: never.">
              <input
                name="expires_at"
                type="datetime-local"
                value={expires}
                onInput={(event) => setExpires(event.currentTarget.value)}
              />
            </Field>
          </div>
          <ProblemView error={issue.error} context="No key was issued" />
          <div class="actions">
            <button type="submit" class="primary" disabled={issue.busy}>
              {issue.busy ? 'Issuing…' : 'Issue a key'}
            </button>
          </div>
        </form>
      ) : null}
    </Section>
  );
}
