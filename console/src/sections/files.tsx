/**
 * Imports, exports and backups: files into rowi (POST /v1/{collection}/import, followed as an
 * operation), files out of it (a collection's list with Accept text/csv or application/x-ndjson),
 * and backups of its SQLite file (POST and GET /v1/backups). Everything through the public API.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, download, get } from '../api.js';
import { bytes, count, duration } from '../format.js';
import { useCan } from '../identity.js';
import { href, navigate } from '../router.js';
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
import type { ViewProps } from '../router.js';
import './files.css';

// ————————————————————————————————————————— what rowi answers

type Status = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';
type Target = 'users' | 'items' | 'stock' | 'orders';

interface RowError {
  row: number;
  field: string | null;
  problem: string;
  detail: string;
}

interface Backup {
  file: string;
  bytes: number;
  sha256: string;
  taken_at: string;
  ms: number;
  schema: string | null;
  rows: Record<string, number>;
  rowi: string;
  url: string;
}

interface OperationBase {
  id: number;
  status: Status;
  created_by: number | null;
  caller_name: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
}

interface ImportOperation extends OperationBase {
  kind: 'import';
  target: Target;
  media_type: string;
  options: { mode: 'atomic' | 'partial'; on_conflict: 'error' | 'skip' | 'update'; dry_run: boolean };
  progress: {
    bytes_read: number;
    bytes_total: number;
    rows_read: number;
    rows_succeeded: number;
    rows_skipped: number;
    rows_failed: number;
    committed_through: number;
  };
  summary: { detail: string; rows_committed: number; committed: string } | null;
  errors: RowError[];
  errors_url: string;
}

interface BackupOperation extends OperationBase {
  kind: 'backup';
  summary: {
    detail: string;
    backup: Backup | null;
    problem: { type: string; status: number } | null;
  } | null;
}

type Operation = ImportOperation | BackupOperation;

const unfinished = (status: Status) => status === 'queued' || status === 'running';

const STATUS_TONE: Record<Status, 'good' | 'bad' | 'warn' | 'neutral'> = {
  queued: 'neutral',
  running: 'warn',
  succeeded: 'good',
  failed: 'bad',
  cancelled: 'neutral',
};

function StatusBadge({ status }: { status: Status }): JSX.Element {
  return <Badge tone={STATUS_TONE[status]}>{status}</Badge>;
}

// ————————————————————————————————————————— following an operation

/**
 * The operation `id`, read again every second while it is queued or running; the reads stop once
 * it has ended and when the view is left.
 */
function useOperation(id: number | undefined): {
  operation: Operation | undefined;
  error: unknown;
  refresh: () => void;
} {
  const [operation, setOperation] = useState<Operation | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [round, setRound] = useState(0);
  useEffect(() => setOperation(undefined), [id]);
  useEffect(() => {
    if (id === undefined) return;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      try {
        const seen = await get<Operation>(`/v1/operations/${id}`, undefined, controller.signal);
        if (controller.signal.aborted) return;
        setOperation(seen);
        setError(undefined);
        if (unfinished(seen.status)) timer = setTimeout(read, 1000);
      } catch (failure) {
        if (controller.signal.aborted) return;
        setError(failure);
        // A passing failure (rowi restarting, a lost answer): try again a little later.
        if (!(failure instanceof ApiError) || failure.status === 0 || failure.status >= 500)
          timer = setTimeout(read, 3000);
      }
    };
    void read();
    return () => {
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [id, round]);
  return { operation, error, refresh: () => setRound((value) => value + 1) };
}

// ————————————————————————————————————————— imports

const TARGETS: { value: Target; label: string; path: string; scope: string; columns: string }[] = [
  { value: 'users', label: 'Users', path: '/v1/users/import', scope: 'users:create', columns: 'name, email' },
  {
    value: 'items',
    label: 'Items',
    path: '/v1/items/import',
    scope: 'items:create',
    columns: 'sku, name, price, quantity (optional)',
  },
  {
    value: 'stock',
    label: 'Stock levels',
    path: '/v1/items/stock/import',
    scope: 'stock:update',
    columns: 'item_id or sku, quantity',
  },
  {
    value: 'orders',
    label: 'Orders',
    path: '/v1/orders/import',
    scope: 'orders:create',
    columns: 'order, name, user_id, item_id, quantity (a row per line of an order)',
  },
];

const TARGET_LABEL: Record<Target, string> = {
  users: 'Users',
  items: 'Items',
  stock: 'Stock levels',
  orders: 'Orders',
};

type FileFormat = 'text/csv' | 'application/x-ndjson';

/** The media type a file's name says: .csv is CSV, .ndjson and .jsonl are NDJSON. */
function formatOf(name: string): FileFormat | undefined {
  const lower = name.toLowerCase();
  if (lower.endsWith('.csv')) return 'text/csv';
  if (lower.endsWith('.ndjson') || lower.endsWith('.jsonl')) return 'application/x-ndjson';
  return undefined;
}

/** A fresh Idempotency-Key: random, from the browser's generator (available without HTTPS too). */
function newIdempotencyKey(): string {
  const random = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(random, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

export function ImportsView({ parts }: ViewProps): JSX.Element {
  const can = useCan();
  const id = parts[0] === undefined ? undefined : Number(parts[0]);
  if (id !== undefined) {
    if (!Number.isInteger(id) || id < 1)
      return (
        <>
          <Header title="Not here" />
          <p>
            There is no operation by that address. <a href={href('imports')}>Back to imports</a>
          </p>
        </>
      );
    return <OperationView key={id} id={id} />;
  }
  return (
    <>
      <Header title="Imports" />
      <p class="lede">
        Load a CSV or NDJSON file into a collection. rowi writes it in the background and this page follows it row by
        row; a dry run checks every row and stores nothing.
      </p>
      <ImportForm />
      {can('operations:read') ? (
        <Section title="Recent operations">
          <OperationList />
        </Section>
      ) : null}
    </>
  );
}

function ImportForm(): JSX.Element {
  const can = useCan();
  const allowed = TARGETS.filter((target) => can(target.scope));
  const [target, setTarget] = useState<Target>(allowed[0]?.value ?? 'items');
  const [mode, setMode] = useState<'atomic' | 'partial'>('atomic');
  const [onConflict, setOnConflict] = useState<'error' | 'skip' | 'update'>('error');
  const [dryRun, setDryRun] = useState(false);
  const [file, setFile] = useState<File | undefined>(undefined);
  const [format, setFormat] = useState<FileFormat>('text/csv');
  const [over, setOver] = useState(false);
  // One key an upload attempt: a second press (or a retry after a lost answer) of the same file
  // and options is answered with the first operation, never imported twice. A new choice, a new key.
  const [idempotencyKey, setIdempotencyKey] = useState(newIdempotencyKey);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => setIdempotencyKey(newIdempotencyKey()), [target, mode, onConflict, dryRun, file, format]);

  const choose = (chosen: File | undefined) => {
    setFile(chosen);
    if (chosen) setFormat(formatOf(chosen.name) ?? format);
  };

  const upload = useAction(async () => {
    const chosen = TARGETS.find((entry) => entry.value === target)!;
    if (file === undefined) throw new Error('Choose a file first.');
    const answer = await call<Operation>(chosen.path, {
      method: 'POST',
      query: {
        mode,
        on_conflict: target === 'orders' ? undefined : onConflict,
        dry_run: dryRun ? 'true' : undefined,
      },
      raw: { data: file, type: format },
      headers: { 'idempotency-key': idempotencyKey },
    });
    navigate(href('imports', answer.body.id));
  });

  if (allowed.length === 0)
    return (
      <Section title="Upload a file">
        <p>
          The key you signed in with may not import into any collection (it needs users:create, items:create,
          stock:update or orders:create).
        </p>
      </Section>
    );

  const described = TARGETS.find((entry) => entry.value === target)!;
  const unknownName = file !== undefined && formatOf(file.name) === undefined;
  return (
    <Section title="Upload a file">
      <form
        class="form files-form"
        onSubmit={(event) => {
          event.preventDefault();
          void upload.run();
        }}
      >
        <div class="form-row">
          <Field label="Collection" hint={`Columns: ${described.columns}`}>
            <select value={target} onChange={(event) => setTarget(event.currentTarget.value as Target)}>
              {allowed.map((entry) => (
                <option key={entry.value} value={entry.value}>
                  {entry.label}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Mode">
            <select value={mode} onChange={(event) => setMode(event.currentTarget.value as 'atomic' | 'partial')}>
              <option value="atomic">Atomic: every row or none</option>
              <option value="partial">Partial: store the good rows, report the bad</option>
            </select>
          </Field>
          {target === 'orders' ? null : (
            <Field label="When the key is taken" hint={target === 'users' ? 'The email' : 'The SKU'}>
              <select
                value={onConflict}
                onChange={(event) => setOnConflict(event.currentTarget.value as 'error' | 'skip' | 'update')}
              >
                <option value="error">Refuse the row</option>
                <option value="skip">Skip the row</option>
                <option value="update">Update that record</option>
              </select>
            </Field>
          )}
        </div>
        <label class="check">
          <input type="checkbox" checked={dryRun} onChange={(event) => setDryRun(event.currentTarget.checked)} /> Dry
          run: check every row, store nothing
        </label>
        <div
          class={over ? 'drop over' : 'drop'}
          onDragEnter={(event) => {
            event.preventDefault();
            setOver(true);
          }}
          onDragOver={(event) => {
            event.preventDefault();
            if (event.dataTransfer) event.dataTransfer.dropEffect = 'copy';
            setOver(true);
          }}
          onDragLeave={() => setOver(false)}
          onDrop={(event) => {
            event.preventDefault();
            setOver(false);
            const dropped = event.dataTransfer?.files[0];
            if (dropped) {
              choose(dropped);
              if (input.current) input.current.value = '';
            }
          }}
        >
          <p class="drop-hint">Drop a .csv, .ndjson or .jsonl file here, or choose one.</p>
          <label class="field drop-field">
            <span class="field-label">File</span>
            <input
              ref={input}
              type="file"
              accept=".csv,.ndjson,.jsonl,text/csv,application/x-ndjson"
              onChange={(event) => choose(event.currentTarget.files?.[0])}
            />
          </label>
          {file ? (
            <p class="drop-file" aria-live="polite">
              <strong>{file.name}</strong> · {bytes(file.size)}
            </p>
          ) : null}
        </div>
        <div class="form-row">
          <Field
            label="Format"
            hint={unknownName ? 'The file name does not say: choose it.' : 'Taken from the file name.'}
          >
            <select value={format} onChange={(event) => setFormat(event.currentTarget.value as FileFormat)}>
              <option value="text/csv">CSV (text/csv)</option>
              <option value="application/x-ndjson">NDJSON (application/x-ndjson)</option>
            </select>
          </Field>
        </div>
        <div class="actions">
          <button type="submit" class="primary" disabled={file === undefined || upload.busy}>
            {upload.busy ? 'Uploading…' : dryRun ? 'Upload and check' : 'Upload'}
          </button>
        </div>
        <ProblemView error={upload.error} context="The file was not accepted" />
      </form>
    </Section>
  );
}

/** Operations, newest first; read again whenever `version` changes (a backup started or ended). */
function OperationList({ kind, version }: { kind?: 'import' | 'backup'; version?: string }): JSX.Element {
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

function OperationView({ id }: { id: number }): JSX.Element {
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

function statusWords(operation: Operation): string {
  switch (operation.status) {
    case 'queued':
      return 'Waiting for its turn.';
    case 'running':
      return operation.kind === 'import' ? 'Reading and writing rows…' : 'Copying the database…';
    case 'succeeded':
      return operation.kind === 'import' && operation.options.dry_run ? 'Checked: a dry run stores nothing.' : 'Done.';
    case 'failed':
      return 'It failed: see the summary.';
    case 'cancelled':
      return 'Cancelled.';
  }
}

function ImportProgress({ operation }: { operation: ImportOperation }): JSX.Element {
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
function ImportDetails({
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

function RowErrors({ operation }: { operation: ImportOperation }): JSX.Element {
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

function BackupDetails({ operation }: { operation: BackupOperation }): JSX.Element {
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

// ————————————————————————————————————————— exports

interface Exportable {
  value: string;
  label: string;
  path: string;
  scope: string;
  /** The names of its "created after/before" filters, when it has them. */
  range?: [string, string];
  statuses?: string[];
}

const EXPORTABLE: Exportable[] = [
  {
    value: 'users',
    label: 'Users',
    path: '/v1/users',
    scope: 'users:read',
    range: ['created_after', 'created_before'],
  },
  {
    value: 'items',
    label: 'Items',
    path: '/v1/items',
    scope: 'items:read',
    range: ['created_after', 'created_before'],
  },
  { value: 'stock', label: 'Stock levels', path: '/v1/items/stock', scope: 'stock:read' },
  {
    value: 'orders',
    label: 'Orders (a row per line in CSV)',
    path: '/v1/orders',
    scope: 'orders:read',
    range: ['created_after', 'created_before'],
    statuses: ['placed', 'paid', 'shipped', 'delivered', 'cancelled'],
  },
  {
    value: 'audit-events',
    label: 'Audit events',
    path: '/v1/audit-events',
    scope: 'audit-events:read',
    range: ['after', 'before'],
  },
  {
    value: 'events',
    label: 'Events',
    path: '/v1/events',
    scope: 'events:read',
    range: ['created_after', 'created_before'],
  },
];

/** A `datetime-local` value (the operator's time) as an instant, RFC 3339. */
function instant(local: string): string | undefined {
  if (local === '') return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

export function ExportsView(_props: ViewProps): JSX.Element {
  const can = useCan();
  const allowed = EXPORTABLE.filter((entry) => can(entry.scope));
  const [which, setWhich] = useState(allowed[0]?.value ?? 'users');
  const [format, setFormat] = useState<'csv' | 'ndjson'>('csv');
  const [after, setAfter] = useState('');
  const [before, setBefore] = useState('');
  const [status, setStatus] = useState('');
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const chosen = allowed.find((entry) => entry.value === which) ?? allowed[0];
  const save = useAction(async () => {
    if (chosen === undefined) return;
    setSaved(undefined);
    const day = new Date().toISOString().slice(0, 10);
    const name = `${chosen.value}-${day}.${format}`;
    const query: Record<string, string | undefined> = {};
    if (chosen.range) {
      query[chosen.range[0]] = instant(after);
      query[chosen.range[1]] = instant(before);
    }
    if (chosen.statuses) query.status = status || undefined;
    const size = await download(chosen.path, format === 'csv' ? 'text/csv' : 'application/x-ndjson', name, query);
    setSaved(`Saved ${name} (${bytes(size)}).`);
  });
  return (
    <>
      <Header title="Exports" />
      <p class="lede">
        Download every record of a collection that the filters select (not a page) as CSV or NDJSON, as the API answers
        a list with <code>Accept: text/csv</code> or <code>application/x-ndjson</code>.
      </p>
      {chosen === undefined ? (
        <p>The key you signed in with may not read any collection that can be exported.</p>
      ) : (
        <Section title="Download an export">
          <form
            class="form files-form"
            onSubmit={(event) => {
              event.preventDefault();
              void save.run();
            }}
          >
            <div class="form-row">
              <Field label="Collection">
                <select
                  value={chosen.value}
                  onChange={(event) => {
                    setWhich(event.currentTarget.value);
                    setSaved(undefined);
                  }}
                >
                  {allowed.map((entry) => (
                    <option key={entry.value} value={entry.value}>
                      {entry.label}
                    </option>
                  ))}
                </select>
              </Field>
            </div>
            <fieldset class="choices">
              <legend>Format</legend>
              <label>
                <input type="radio" name="format" checked={format === 'csv'} onChange={() => setFormat('csv')} /> CSV (a
                header row; nested fields as dotted columns)
              </label>
              <label>
                <input type="radio" name="format" checked={format === 'ndjson'} onChange={() => setFormat('ndjson')} />{' '}
                NDJSON (a JSON record a line)
              </label>
            </fieldset>
            {chosen.range || chosen.statuses ? (
              <div class="form-row">
                {chosen.range ? (
                  <>
                    <Field label="Created after" hint="Optional; your local time.">
                      <input
                        type="datetime-local"
                        value={after}
                        onInput={(event) => setAfter(event.currentTarget.value)}
                      />
                    </Field>
                    <Field label="Created before" hint="Optional; your local time.">
                      <input
                        type="datetime-local"
                        value={before}
                        onInput={(event) => setBefore(event.currentTarget.value)}
                      />
                    </Field>
                  </>
                ) : null}
                {chosen.statuses ? (
                  <Field label="Status">
                    <select value={status} onChange={(event) => setStatus(event.currentTarget.value)}>
                      <option value="">Any</option>
                      {chosen.statuses.map((value) => (
                        <option key={value} value={value}>
                          {value}
                        </option>
                      ))}
                    </select>
                  </Field>
                ) : null}
              </div>
            ) : null}
            <div class="actions">
              <button type="submit" class="primary" disabled={save.busy}>
                {save.busy ? 'Downloading…' : 'Download'}
              </button>
            </div>
            <ProblemView error={save.error} context="The export was not downloaded" />
            <Notice>{saved}</Notice>
          </form>
        </Section>
      )}
    </>
  );
}

// ————————————————————————————————————————— backups

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
