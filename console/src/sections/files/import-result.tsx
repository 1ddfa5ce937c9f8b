/** An import on its operation's page: its progress, summary and what it was asked, its refused rows. */
import type { ComponentChildren, JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call, download } from '../../api.js';
import { bytes, count, duration } from '../../format.js';
import { ProblemView, Section, Table, Time, useAction, useLoad, type Column } from '../../ui.js';
import { TARGET_LABEL, unfinished, type ImportOperation, type RowError } from './shared.js';

export function ImportProgress({ operation }: { operation: ImportOperation }): JSX.Element {
  const { progress } = operation;
  const ended = !unfinished(operation.status);
  const total = Math.max(progress.bytes_total, 1);
  const done = operation.status === 'succeeded' ? total : Math.min(progress.bytes_read, total);
  const share = Math.round((done / total) * 100);
  return (
    <div class="import-progress">
      <progress max={total} value={done} aria-label={`Import ${operation.id}: ${share} % of the file read`}>
        {share} %
      </progress>
      <p class="progress-words">
        {ended ? 'Read ' : 'Reading: '}
        {bytes(progress.bytes_read)} of {bytes(progress.bytes_total)} ({share} %)
      </p>
      <dl class="grid counts">
        <div class="stat">
          <dt class="stat-label">Rows read</dt>
          <dd class="stat-value">{count(progress.rows_read)}</dd>
        </div>
        <div class="stat">
          <dt class="stat-label">{operation.options.dry_run ? 'Rows that would be stored' : 'Rows stored'}</dt>
          <dd class="stat-value">{count(progress.rows_succeeded)}</dd>
        </div>
        <div class="stat">
          <dt class="stat-label">Rows skipped</dt>
          <dd class="stat-value">{count(progress.rows_skipped)}</dd>
        </div>
        <div class="stat">
          <dt class="stat-label">Rows refused</dt>
          <dd class="stat-value">{count(progress.rows_failed)}</dd>
        </div>
      </dl>
    </div>
  );
}

/** An import's summary, then `children` (its refused rows), then what it was asked to do. */
export function ImportDetails({
  operation,
  children,
}: {
  operation: ImportOperation;
  children?: ComponentChildren;
}): JSX.Element {
  const took =
    operation.started_at && operation.finished_at
      ? Date.parse(operation.finished_at) - Date.parse(operation.started_at)
      : undefined;
  return (
    <>
      {operation.summary ? (
        <Section title="Summary">
          <p class="summary-detail">{operation.summary.detail}</p>
          {operation.options.dry_run ? (
            <p>
              <strong>A dry run: nothing was stored.</strong> Upload the file again without the dry run to store it.
            </p>
          ) : null}
          <dl class="record">
            <dt>Rows kept</dt>
            <dd>{count(operation.summary.rows_committed)}</dd>
            <dt>Committed</dt>
            <dd>{operation.summary.committed}</dd>
          </dl>
        </Section>
      ) : null}
      {children}
      <Section title="The import">
        <dl class="record">
          <dt>Collection</dt>
          <dd>{TARGET_LABEL[operation.target]}</dd>
          <dt>File</dt>
          <dd>
            {operation.media_type}, {bytes(operation.progress.bytes_total)}
          </dd>
          <dt>Mode</dt>
          <dd>
            {operation.options.mode}
            {operation.target === 'orders' ? '' : `, on a taken key: ${operation.options.on_conflict}`}
            {operation.options.dry_run ? ', dry run' : ''}
          </dd>
          <dt>Started by</dt>
          <dd>{operation.caller_name ?? '—'}</dd>
          <dt>Uploaded</dt>
          <dd>
            <Time at={operation.created_at} />
          </dd>
          <dt>Ended</dt>
          <dd>
            <Time at={operation.finished_at} />
            {took !== undefined ? ` (took ${duration(took)})` : ''}
          </dd>
        </dl>
      </Section>
    </>
  );
}

const ERRORS_PAGE = 50;

export function RowErrors({ operation }: { operation: ImportOperation }): JSX.Element {
  const ended = !unfinished(operation.status);
  // While it runs, the operation's first 20 errors; once ended, every one (the list is not paged by rowi).
  const all = useLoad(
    (signal) =>
      ended
        ? call<{ data: RowError[] }>(operation.errors_url, { signal }).then((answer) => answer.body.data)
        : Promise.resolve(operation.errors),
    [operation.id, ended, ended ? 0 : operation.errors.length],
  );
  const [page, setPage] = useState(0);
  const rows = all.data ?? operation.errors;
  const pages = Math.max(1, Math.ceil(rows.length / ERRORS_PAGE));
  const shown = rows.slice(page * ERRORS_PAGE, (page + 1) * ERRORS_PAGE);
  const save = useAction(() =>
    download(operation.errors_url, 'application/x-ndjson', `operation-${operation.id}-errors.ndjson`),
  );
  const columns: Column<RowError>[] = [
    { label: 'Row', numeric: true, render: (error) => count(error.row) },
    { label: 'Field', render: (error) => (error.field === null ? 'the whole row' : <code>{error.field}</code>) },
    { label: 'Problem', render: (error) => error.problem },
    { label: 'Detail', render: (error) => error.detail },
  ];
  return (
    <Section title="Refused rows">
      <p>
        {count(operation.progress.rows_failed)} {operation.progress.rows_failed === 1 ? 'row was' : 'rows were'} refused
        {ended ? '.' : ' so far (the first ones show while it runs).'}{' '}
        {operation.media_type === 'text/csv'
          ? 'Rows are the file’s lines: row 1 is the header.'
          : 'Rows are the file’s lines, from 1.'}
      </p>
      <ProblemView error={all.error} context="Could not read the refused rows" />
      <Table
        caption="Refused rows"
        columns={columns}
        rows={shown}
        rowKey={(error) => `${error.row}:${error.field ?? ''}:${error.problem}`}
        empty={all.loading ? 'Loading…' : 'None.'}
      />
      <div class="pager-row">
        <button type="button" class="download" onClick={() => void save.run()} disabled={save.busy}>
          Download every refused row (NDJSON)
        </button>
        {pages > 1 ? (
          <nav class="pager" aria-label="Pages of refused rows">
            <button type="button" onClick={() => setPage(page - 1)} disabled={page === 0}>
              Previous
            </button>
            <span>
              Page {page + 1} of {pages}
            </span>
            <button type="button" onClick={() => setPage(page + 1)} disabled={page + 1 >= pages}>
              Next
            </button>
          </nav>
        ) : null}
      </div>
      <ProblemView error={save.error} context="Could not download the refused rows" />
    </Section>
  );
}
