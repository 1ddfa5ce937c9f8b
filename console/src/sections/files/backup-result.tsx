/** A backup on its operation's page: its summary and the backup taken. */
import type { JSX } from 'preact';
import { bytes, count, duration } from '../../format.js';
import { href } from '../../router.js';
import { Section, Time } from '../../ui.js';
import type { Backup, BackupOperation } from './shared.js';

export function BackupDetails({ operation }: { operation: BackupOperation }): JSX.Element {
  const backup = operation.summary?.backup ?? null;
  return (
    <Section title={operation.summary ? 'Summary' : 'The backup'}>
      {operation.summary ? <p class="summary-detail">{operation.summary.detail}</p> : null}
      {operation.summary?.problem ? (
        <p>
          It stands for the server error {operation.summary.problem.status} {operation.summary.problem.type}
          {operation.summary.problem.type === 'insufficient-storage'
            ? ': the backup folder’s disk is full.'
            : operation.summary.problem.type === 'service-unavailable'
              ? ': rowi stopped before the backup was whole; take another.'
              : '.'}
        </p>
      ) : null}
      <dl class="record">
        {backup ? <BackupRecord backup={backup} /> : null}
        <dt>Started by</dt>
        <dd>{operation.caller_name ?? '—'}</dd>
        <dt>Asked</dt>
        <dd>
          <Time at={operation.created_at} />
        </dd>
        <dt>Ended</dt>
        <dd>
          <Time at={operation.finished_at} />
        </dd>
      </dl>
      <p>
        <a href={href('backups')}>Every backup in the folder</a>
      </p>
    </Section>
  );
}

function BackupRecord({ backup }: { backup: Backup }): JSX.Element {
  return (
    <>
      <dt>File</dt>
      <dd>
        <code>{backup.file}</code>
      </dd>
      <dt>Size</dt>
      <dd>{bytes(backup.bytes)}</dd>
      <dt>Taken at</dt>
      <dd>
        <Time at={backup.taken_at} /> (took {duration(backup.ms)})
      </dd>
      <dt>SHA-256</dt>
      <dd>
        <code class="hash">{backup.sha256}</code>
      </dd>
      <dt>Schema</dt>
      <dd>{backup.schema ?? '—'}</dd>
      <dt>Rows</dt>
      <dd>
        {Object.entries(backup.rows)
          .map(([table, rows]) => `${table} ${count(rows)}`)
          .join(', ') || '—'}
      </dd>
    </>
  );
}
