/**
 * The console's parts, shared by every section: loading what a view shows, tables and paging,
 * problems explained, forms, confirmations, copying. Every value from rowi is rendered as text
 * (Preact escapes it); nothing here writes HTML, sets a style attribute or builds a URL from a record.
 */
import { cloneElement, isValidElement, type ComponentChildren, type JSX, type VNode } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError, call, type Page } from './api.js';
import { dateTime } from './format.js';

/** What an asynchronous load holds: its value once loaded, the problem if it failed. */
export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` now and whenever `deps` change (or reload() is called); a late answer of an older load is dropped. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [round, setRound] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true }));
    load(controller.signal).then(
      (data) => {
        if (!controller.signal.aborted) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState({ data: undefined, error, loading: false });
      },
    );
    return () => controller.abort();
  }, [...deps, round]);
  const reload = useCallback(() => setRound((value) => value + 1), []);
  return { ...state, reload };
}

/** A collection read page by page with its cursors: Next follows next_cursor, Previous goes back. */
export interface Paged<T> extends Loaded<Page<T>> {
  rows: T[];
  pageNumber: number;
  next: (() => void) | undefined;
  previous: (() => void) | undefined;
}

export function usePaged<T>(
  path: string,
  query: Record<string, string | number | undefined>,
  deps: unknown[] = [],
): Paged<T> {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const key = JSON.stringify([path, query, ...deps]);
  const lastKey = useRef(key);
  if (lastKey.current !== key) {
    lastKey.current = key;
    if (cursors.length !== 1) setCursors([undefined]);
  }
  const cursor = cursors.at(-1);
  const loaded = useLoad(
    (signal) => call<Page<T>>(path, { query: { ...query, cursor }, signal }).then((answer) => answer.body),
    [key, cursor],
  );
  const nextCursor = loaded.data?.next_cursor ?? null;
  return {
    ...loaded,
    rows: loaded.data?.data ?? [],
    pageNumber: cursors.length,
    next: nextCursor === null ? undefined : () => setCursors((list) => [...list, nextCursor]),
    previous: cursors.length > 1 ? () => setCursors((list) => list.slice(0, -1)) : undefined,
  };
}

/** What each problem type means for the person in front of the console, beyond rowi's own detail. */
const EXPLAINED: Record<string, string> = {
  'precondition-failed':
    'Someone changed this record after you opened it, so your change was not made (nothing was overwritten). Reload it to see the current version, then make your change again.',
  'concurrent-change': 'Another change to the same record was being made at that moment. Try again.',
  'insufficient-scope':
    'The key you signed in with may not do this. An admin can give its caller the scope named below.',
  'invalid-credentials': 'The key or token is no longer accepted (revoked, expired or unknown). Sign in again.',
  'missing-credentials': 'You are not signed in. Sign in again.',
  'rate-limited': 'This key has made too many requests for now. Wait a moment and try again.',
  'not-found': 'It is not there: deleted since, or not visible to the key you signed in with.',
};

/** A problem rowi answered (or a failure to reach it), explained; never the raw JSON alone. */
export function ProblemView({ error, context }: { error: unknown; context?: string }): JSX.Element | null {
  if (error === undefined || error === null) return null;
  if (!(error instanceof ApiError)) {
    return (
      <div class="problem" role="alert">
        <p class="problem-title">{context ?? 'Something went wrong'}</p>
        <p>{error instanceof Error ? error.message : String(error)}</p>
      </div>
    );
  }
  const { problem } = error;
  const explained = EXPLAINED[error.kind];
  const missing = Array.isArray(problem.missing_scopes) ? (problem.missing_scopes as unknown[]).map(String) : [];
  return (
    <div class="problem" role="alert">
      <p class="problem-title">
        {context ? `${context}: ` : ''}
        {problem.title}
        {problem.status ? <span class="problem-status"> ({problem.status})</span> : null}
      </p>
      {explained ? <p>{explained}</p> : null}
      {problem.detail ? <p class="problem-detail">{problem.detail}</p> : null}
      {missing.length > 0 ? <p>Scopes needed: {missing.join(', ')}</p> : null}
      {problem.errors && problem.errors.length > 0 ? (
        <ul class="problem-errors">
          {problem.errors.map((item, index) => (
            <li key={index}>
              {item.pointer ? <code>{item.pointer}</code> : null} {item.detail}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export interface Column<T> {
  label: string;
  render: (row: T) => ComponentChildren;
  /** Narrow screens hide the columns that are not essential. */
  optional?: boolean;
  numeric?: boolean;
}

/** A table of rows; each row's key is `rowKey(row)`. Wide tables scroll within their own frame. */
export function Table<T>({
  caption,
  columns,
  rows,
  rowKey,
  empty = 'Nothing here yet.',
}: {
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string | number;
  empty?: string;
}): JSX.Element {
  return (
    <div class="table-frame" tabIndex={0} role="region" aria-label={caption}>
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th
                key={column.label}
                scope="col"
                class={
                  [column.optional ? 'optional' : '', column.numeric ? 'numeric' : ''].join(' ').trim() || undefined
                }
              >
                {column.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={columns.length} class="empty">
                {empty}
              </td>
            </tr>
          ) : (
            rows.map((row) => (
              <tr key={rowKey(row)}>
                {columns.map((column) => (
                  <td
                    key={column.label}
                    data-label={column.label}
                    class={
                      [column.optional ? 'optional' : '', column.numeric ? 'numeric' : ''].join(' ').trim() || undefined
                    }
                  >
                    {column.render(row)}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

/** A paged collection: its table, its problem if the read failed, Previous and Next. */
export function PagedTable<T>({
  paged,
  ...table
}: {
  paged: Paged<T>;
  caption: string;
  columns: Column<T>[];
  rowKey: (row: T) => string | number;
  empty?: string;
}): JSX.Element {
  return (
    <div class="paged" aria-busy={paged.loading}>
      <ProblemView error={paged.error} context={`Could not read ${table.caption.toLowerCase()}`} />
      <Table
        {...table}
        rows={paged.rows}
        empty={paged.loading && paged.data === undefined ? 'Loading…' : table.empty}
      />
      <nav class="pager" aria-label={`Pages of ${table.caption.toLowerCase()}`}>
        <button type="button" onClick={paged.previous} disabled={paged.previous === undefined || paged.loading}>
          Previous
        </button>
        <span>
          Page {paged.pageNumber}
          {paged.loading && paged.data !== undefined ? ' (loading…)' : ''}
        </span>
        <button type="button" onClick={paged.next} disabled={paged.next === undefined || paged.loading}>
          Next
        </button>
      </nav>
    </div>
  );
}

/**
 * A labelled form control; the control is the child. The label names the control by its id, not
 * by wrapping it: a label wrapped around a select would give the control a name made of every
 * option. The hint describes the control (aria-describedby).
 */
export function Field({
  label,
  hint,
  children,
}: {
  label: string;
  hint?: string;
  children: ComponentChildren;
}): JSX.Element {
  const id = useId();
  const hintId = `${id}-hint`;
  const child = isValidElement(children) ? (children as VNode<{ id?: string }>) : undefined;
  const controlId = child?.props.id ?? id;
  const control = child && cloneElement(child, { id: controlId, ...(hint ? { 'aria-describedby': hintId } : {}) });
  if (control === undefined)
    return (
      <label class="field">
        <span class="field-label">{label}</span>
        {children}
        {hint ? <span class="field-hint">{hint}</span> : null}
      </label>
    );
  return (
    <div class="field">
      <label class="field-label" for={controlId}>
        {label}
      </label>
      {control}
      {hint ? (
        <span class="field-hint" id={hintId}>
          {hint}
        </span>
      ) : null}
    </div>
  );
}

/** Runs an action, showing it is busy, and what it answered: a problem, or `done` when it worked. */
export function useAction<A extends unknown[], R>(action: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action(...args);
    } catch (failure) {
      setError(failure);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clear: () => setError(undefined) };
}

/**
 * A button that asks once more before it acts: the first press shows "Yes, …" and "Keep". Give it
 * a key where the buttons beside it come and go (Enable becoming Disable), or a question being
 * asked moves to another button when the view is read again.
 */
export function ConfirmButton({
  label,
  confirm,
  onConfirm,
  disabled,
  danger = true,
}: {
  label: string;
  confirm: string;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
}): JSX.Element {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button type="button" class={danger ? 'danger' : undefined} disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  return (
    <span class="confirm" role="group" aria-label={confirm}>
      <span>{confirm}</span>
      <button
        ref={yes}
        type="button"
        class={danger ? 'danger' : undefined}
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        Yes, {label.toLowerCase()}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Keep
      </button>
    </span>
  );
}

/** Copies `text` to the clipboard and says so. */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }): JSX.Element {
  const [copied, setCopied] = useState<boolean | undefined>(undefined);
  return (
    <button
      type="button"
      onClick={() =>
        navigator.clipboard.writeText(text).then(
          () => setCopied(true),
          () => setCopied(false),
        )
      }
    >
      {copied === true ? 'Copied' : copied === false ? 'Select and copy it yourself' : label}
    </button>
  );
}

/** A date and time in the operator's locale, the exact instant in its title. */
export function Time({ at }: { at: string | null | undefined }): JSX.Element {
  if (!at) return <span>—</span>;
  return (
    <time dateTime={at} title={at}>
      {dateTime(at)}
    </time>
  );
}

/** A short word for a state, coloured by its tone (and never by colour alone: the word says it). */
export function Badge({
  tone,
  children,
}: {
  tone: 'good' | 'bad' | 'warn' | 'neutral';
  children: ComponentChildren;
}): JSX.Element {
  return <span class={`badge badge-${tone}`}>{children}</span>;
}

/** A value as indented JSON text. */
export function JsonView({ value, label }: { value: unknown; label: string }): JSX.Element {
  return (
    <pre class="json" tabIndex={0} aria-label={label}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** A message that something worked, read out by screen readers. */
export function Notice({ children }: { children: ComponentChildren }): JSX.Element | null {
  if (children === undefined || children === null || children === false || children === '') return null;
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

/** A view's heading and what sits beside it. */
export function Header({ title, children }: { title: string; children?: ComponentChildren }): JSX.Element {
  useEffect(() => {
    document.title = `${title} · rowi console`;
  }, [title]);
  return (
    <div class="view-header">
      <h1 tabIndex={-1}>{title}</h1>
      {children ? <div class="view-actions">{children}</div> : null}
    </div>
  );
}

/** A titled part of a view. */
export function Section({ title, children }: { title: string; children: ComponentChildren }): JSX.Element {
  return (
    <section class="panel" aria-label={title}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}
