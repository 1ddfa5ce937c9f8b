/** The form of a caller: creating one, or changing one (role, record access, scopes, rate limit). */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from '../../api.js';
import { Field, Notice, useAction } from '../../ui.js';
import { grantable, type Access, type Caller, type Catalogue } from './model.js';
import { ScopeChoice } from './scopes.js';
import { CallerProblem } from './shared.js';

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

export function CallerForm({
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
