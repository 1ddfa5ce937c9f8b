/** The backups view: take one (POST /v1/backups, followed), the backups in the folder, those taken over HTTP. */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call } from '../../api.js';
import { bytes, count, duration } from '../../format.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { Header, Notice, PagedTable, ProblemView, Section, Time, useAction, usePaged } from '../../ui.js';
import type { ViewProps } from '../../router.js';
import { OperationList } from './operation-list.js';
import { StatusBadge, statusWords, unfinished, useOperation, type Backup, type BackupOperation } from './shared.js';
import './files.css';

/** The tables of records a backup's row counts are shown for in the list (all of them on its operation's page). */
const RECORD_TABLES = ['users', 'items', 'orders', 'callers'];

/** What a refusal of the backup routes means for this rowi, beyond rowi's own words. */
function backupsRefusal(error: unknown): string | undefined {
  if (!(error instanceof ApiError)) return undefined;
  if (error.kind === 'backups-not-configured')
    return 'This rowi has no backup folder: whoever runs it sets ROWI_BACKUP_DIR (and restarts it) to take backups here. Until then, back up from the command line with `rowi backup FILE`.';
  if (error.kind === 'backups-on-postgresql')
    return 'This rowi stores its data in PostgreSQL, which is backed up with its own tools (pg_dump, pg_basebackup), not from here.';
  return undefined;
}

export function BackupsView(_props: ViewProps): JSX.Element {
  const can = useCan();
  const [following, setFollowing] = useState<number | undefined>(undefined);
  const { operation, error: followError } = useOperation(following);
  const paged = usePaged<Backup>('/v1/backups', { limit: 20 });
  const refusal = backupsRefusal(paged.error);
  const take = useAction(async () => {
    try {
      const answer = await call<BackupOperation>('/v1/backups', { method: 'POST' });
      setFollowing(answer.body.id);
    } catch (failure) {
      // One runs already: follow that one instead.
      if (failure instanceof ApiError && failure.kind === 'backup-running') {
        const other = /\/v1\/operations\/(\d+)$/.exec(String(failure.problem.operation ?? ''));
        if (other) {
          setFollowing(Number(other[1]));
          return;
        }
      }
      throw failure;
    }
  });
  const ended = operation !== undefined && !unfinished(operation.status);
  const reload = paged.reload;
  useEffect(() => {
    if (ended) reload();
  }, [ended, operation?.id]);

  return (
    <>
      <Header title="Backups" />
      <p class="lede">
        A backup is a checked copy of rowi’s SQLite file, taken while it serves, written with its manifest into the
        backup folder (ROWI_BACKUP_DIR). Restore one with <code>rowi restore FILE</code>, rowi stopped.
      </p>
      {refusal ? (
        <div class="panel explain" role="note">
          <p>
            <strong>No backups here.</strong> {refusal}
          </p>
        </div>
      ) : null}
      {can('backups:create') ? (
        <Section title="Take a backup">
          <div class="actions">
            <button
              type="button"
              class="primary"
              onClick={() => void take.run()}
              disabled={take.busy || (operation !== undefined && !ended) || refusal !== undefined}
            >
              {take.busy ? 'Asking…' : 'Take a backup'}
            </button>
            {following !== undefined ? <a href={href('imports', following)}>Backup operation {following}</a> : null}
          </div>
          <ProblemView error={take.error} context="No backup was started" />
          <ProblemView error={followError} context="Could not follow the backup" />
          {operation?.kind === 'backup' ? (
            <div class="backup-now" aria-live="polite">
              <p class="operation-state">
                <StatusBadge status={operation.status} />
                <span>
                  {operation.status === 'queued'
                    ? 'Waiting for the backup before it to end…'
                    : operation.status === 'running'
                      ? 'Copying and checking the database (at low priority, so requests go first)…'
                      : (operation.summary?.detail ?? statusWords(operation))}
                </span>
              </p>
              {operation.status === 'succeeded' && operation.summary?.backup ? (
                <Notice>
                  Backup taken: {operation.summary.backup.file} ({bytes(operation.summary.backup.bytes)}).
                </Notice>
              ) : null}
            </div>
          ) : null}
        </Section>
      ) : null}
      {can('backups:read') ? (
        <Section title="Backups in the folder">
          {refusal ? (
            <p>{paged.error instanceof ApiError ? paged.error.problem.title : null}.</p>
          ) : (
            <div class="files-table">
              <PagedTable
                paged={paged}
                caption="Backups"
                rowKey={(backup) => backup.file}
                empty="The folder holds no backup yet."
                columns={[
                  { label: 'File', render: (backup) => <code>{backup.file}</code> },
                  { label: 'Size', numeric: true, render: (backup) => bytes(backup.bytes) },
                  { label: 'Taken at', render: (backup) => <Time at={backup.taken_at} /> },
                  { label: 'Took', numeric: true, optional: true, render: (backup) => duration(backup.ms) },
                  {
                    label: 'Rows',
                    optional: true,
                    render: (backup) =>
                      RECORD_TABLES.filter((table) => backup.rows[table] !== undefined)
                        .map((table) => `${table} ${count(backup.rows[table])}`)
                        .join(', ') || '—',
                  },
                  {
                    label: 'SHA-256',
                    optional: true,
                    render: (backup) => <code class="hash">{backup.sha256}</code>,
                  },
                ]}
              />
            </div>
          )}
        </Section>
      ) : null}
      {can('operations:read') ? (
        <Section title="Backups taken over HTTP">
          <OperationList kind="backup" version={`${following ?? ''}:${operation?.status ?? ''}`} />
        </Section>
      ) : null}
    </>
  );
}
