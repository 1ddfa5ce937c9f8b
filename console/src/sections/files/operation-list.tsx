/** The list of operations (imports and backups), filtered by kind and status, paged. */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { count } from '../../format.js';
import { href } from '../../router.js';
import { Field, PagedTable, Time, usePaged, type Column } from '../../ui.js';
import { StatusBadge, TARGET_LABEL, type Operation } from './shared.js';

/** Operations, newest first; read again whenever `version` changes (a backup started or ended). */
export function OperationList({ kind, version }: { kind?: 'import' | 'backup'; version?: string }): JSX.Element {
  const [status, setStatus] = useState('');
  const [shownKind, setShownKind] = useState<string>(kind ?? '');
  const paged = usePaged<Operation>(
    '/v1/operations',
    {
      limit: 20,
      sort: '-id',
      kind: kind ?? (shownKind || undefined),
      status: status || undefined,
    },
    [version],
  );
  const all: Column<Operation>[] = [
    {
      label: 'Operation',
      render: (operation) => (
        <a href={href('imports', operation.id)}>
          {operation.kind === 'import' ? 'Import' : 'Backup'} {operation.id}
        </a>
      ),
    },
    {
      label: 'Into',
      render: (operation) =>
        operation.kind === 'import' ? (
          <>
            {TARGET_LABEL[operation.target]}
            {operation.options.dry_run ? <span class="muted"> (dry run)</span> : null}
          </>
        ) : (
          'ROWI_BACKUP_DIR'
        ),
    },
    { label: 'Status', render: (operation) => <StatusBadge status={operation.status} /> },
    {
      label: 'Rows stored',
      numeric: true,
      render: (operation) => (operation.kind === 'import' ? count(operation.progress.rows_succeeded) : '—'),
    },
    {
      label: 'Rows refused',
      numeric: true,
      optional: true,
      render: (operation) => (operation.kind === 'import' ? count(operation.progress.rows_failed) : '—'),
    },
    { label: 'By', optional: true, render: (operation) => operation.caller_name ?? '—' },
    { label: 'Started', optional: true, render: (operation) => <Time at={operation.created_at} /> },
  ];
  // A list of backups only: the columns of imports say nothing there.
  const columns =
    kind === 'backup' ? all.filter((column) => !['Into', 'Rows stored', 'Rows refused'].includes(column.label)) : all;
  return (
    <div class="files-table">
      <div class="filters">
        {kind === undefined ? (
          <Field label="Kind">
            <select value={shownKind} onChange={(event) => setShownKind(event.currentTarget.value)}>
              <option value="">Imports and backups</option>
              <option value="import">Imports</option>
              <option value="backup">Backups</option>
            </select>
          </Field>
        ) : null}
        <Field label="Status">
          <select value={status} onChange={(event) => setStatus(event.currentTarget.value)}>
            <option value="">Any</option>
            <option value="queued">Queued</option>
            <option value="running">Running</option>
            <option value="succeeded">Succeeded</option>
            <option value="failed">Failed</option>
            <option value="cancelled">Cancelled</option>
          </select>
        </Field>
        <button type="button" onClick={paged.reload}>
          Refresh
        </button>
      </div>
      <PagedTable
        paged={paged}
        caption={kind === 'backup' ? 'Backup operations' : 'Operations'}
        columns={columns}
        rowKey={(operation) => operation.id}
        empty={kind === 'backup' ? 'No backup was taken over HTTP yet.' : 'No import or backup yet.'}
      />
    </div>
  );
}
