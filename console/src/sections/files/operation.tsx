/** An operation's page (#/imports/{id}): its status, followed until it ends, cancel, then its details. */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call } from '../../api.js';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { ConfirmButton, Header, Notice, ProblemView, Section, useAction } from '../../ui.js';
import { BackupDetails } from './backup-result.js';
import { ImportDetails, ImportProgress, RowErrors } from './import-result.js';
import { StatusBadge, statusWords, unfinished, useOperation } from './shared.js';

export function OperationView({ id }: { id: number }): JSX.Element {
  const { operation, error, refresh } = useOperation(id);
  const can = useCan();
  const [cancelAsked, setCancelAsked] = useState(false);
  const cancel = useAction(async () => {
    await call(`/v1/operations/${id}/cancel`, { method: 'POST' });
    setCancelAsked(true);
    refresh();
  });
  const title = operation ? `${operation.kind === 'import' ? 'Import' : 'Backup'} ${id}` : `Operation ${id}`;
  return (
    <>
      <Header title={title}>
        <a class="button" href={href('imports')}>
          All imports
        </a>
      </Header>
      <ProblemView error={error} context={`Could not read operation ${id}`} />
      {operation === undefined ? (
        error === undefined ? (
          <p aria-busy="true">Loading…</p>
        ) : null
      ) : (
        <>
          <Section title="Status">
            <div class="operation-status">
              <p class="operation-state">
                <StatusBadge status={operation.status} />
                <span>{statusWords(operation)}</span>
              </p>
              {unfinished(operation.status) && can('operations:update') ? (
                <ConfirmButton
                  key={operation.kind === 'import' ? 'Cancel the import' : 'Cancel the backup'}
                  label={operation.kind === 'import' ? 'Cancel the import' : 'Cancel the backup'}
                  confirm={
                    operation.kind === 'import'
                      ? 'Stop it at its next commit? Rows committed before stay stored.'
                      : 'Cancel this backup? Only a queued backup can be.'
                  }
                  onConfirm={() => void cancel.run()}
                  disabled={cancel.busy}
                />
              ) : null}
            </div>
            <ProblemView error={cancel.error} context="It was not cancelled" />
            <Notice>
              {cancelAsked && unfinished(operation.status)
                ? 'Cancel asked: it stops at its next commit.'
                : cancelAsked && operation.status === 'cancelled'
                  ? 'Cancelled.'
                  : undefined}
            </Notice>
            {operation.kind === 'import' ? <ImportProgress operation={operation} /> : null}
          </Section>
          {operation.kind === 'import' ? (
            <ImportDetails operation={operation}>
              {operation.progress.rows_failed > 0 ? <RowErrors operation={operation} /> : null}
            </ImportDetails>
          ) : (
            <BackupDetails operation={operation} />
          )}
        </>
      )}
    </>
  );
}
