/** The list of callers, filtered by role. */
import type { JSX } from 'preact';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { Badge, Field, Header, Notice, PagedTable, Time, useLoad, usePaged, type Column } from '../../ui.js';
import { accessSummary, loadCatalogue, type Caller } from './model.js';

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

export function CallerList({ params }: { params: URLSearchParams }): JSX.Element {
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
