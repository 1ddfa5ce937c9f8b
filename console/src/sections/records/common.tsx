/**
 * What the record views share: the message handed across a navigation, a record read with its
 * ETag, a write's problem with the way to reload after a 412, the fields every record has, the
 * link back to a list, Delete with If-Match. Imports no view file.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call, type Answer } from '../../api.js';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { ConfirmButton, ProblemView, Time, useAction, useLoad } from '../../ui.js';
import type { Owned } from './types.js';
import './records.css';

/**
 * A message handed from one view to the next across a navigation ("User created."), shown once
 * by the view that opens next.
 */
export let flash: string | undefined;
export function setFlash(message: string): void {
  flash = message;
}
export function takeFlash(): string | undefined {
  const message = flash;
  flash = undefined;
  return message;
}

/** A record read with its ETag; `replace` puts in what a write answered (the record and its new ETag). */
export function useRecord<T>(path: string) {
  const loaded = useLoad((signal) => call<T>(path, { signal }), [path]);
  const [written, setWritten] = useState<Answer<T> | undefined>(undefined);
  useEffect(() => setWritten(undefined), [loaded.data]);
  const answer = written ?? loaded.data;
  return {
    record: answer?.body,
    etag: answer?.etag ?? null,
    error: loaded.error,
    loading: loaded.loading,
    reload: loaded.reload,
    replace: setWritten,
  };
}

export function isStale(error: unknown): boolean {
  return error instanceof ApiError && error.kind === 'precondition-failed';
}

/** A write's problem, explained; when the record changed meanwhile (412), the way to its current version. */
export function WriteProblem({
  error,
  context,
  onReload,
}: {
  error: unknown;
  context: string;
  onReload: () => void;
}): JSX.Element | null {
  if (error === undefined) return null;
  return (
    <div class="records-write-problem">
      <ProblemView error={error} context={context} />
      {isStale(error) ? (
        <button type="button" class="primary" onClick={onReload}>
          Reload
        </button>
      ) : null}
    </div>
  );
}

/** A caller, by its id: a link when the key may read callers. */
export function CallerRef({ id }: { id: number | null }): JSX.Element {
  const can = useCan();
  if (id === null) return <span>none (an external issuer's subject, or from before owners)</span>;
  return can('callers:read') ? <a href={href('callers', id)}>caller #{id}</a> : <span>caller #{id}</span>;
}

/** The fields every record has, for the end of its dl.record. */
export function Provenance({ record }: { record: Owned }): JSX.Element {
  return (
    <>
      <dt>Created by</dt>
      <dd>
        <CallerRef id={record.created_by} />
      </dd>
      <dt>Created</dt>
      <dd>
        <Time at={record.created_at} />
      </dd>
      <dt>Last changed</dt>
      <dd>
        <Time at={record.updated_at} />
      </dd>
    </>
  );
}

/** The link back to a list. */
export function BackLink({ section, label }: { section: string; label: string }): JSX.Element {
  return (
    <p class="records-back">
      <a href={href(section)}>← {label}</a>
    </p>
  );
}

/** A record's id as a route part: a positive integer, or the text as given (rowi explains a bad one). */
export function recordPath(collection: string, id: string): string {
  return `/v1/${collection}/${encodeURIComponent(id)}`;
}

/** What a record view shows while its record is not (yet) there. */
export function NotLoaded({
  error,
  loading,
  what,
  section,
  listLabel,
}: {
  error: unknown;
  loading: boolean;
  what: string;
  section: string;
  listLabel: string;
}): JSX.Element {
  return (
    <>
      {loading ? <p aria-live="polite">Loading…</p> : null}
      <ProblemView error={error} context={`Could not read ${what}`} />
      {!loading ? <BackLink section={section} label={listLabel} /> : null}
    </>
  );
}

/**
 * A record's Delete (ConfirmButton, DELETE with If-Match); on success, the list, saying so.
 */
export function useDelete(path: string, etag: string | null, section: string, said: string) {
  return useAction(async () => {
    await call(path, { method: 'DELETE', ifMatch: etag });
    setFlash(said);
    navigate(href(section));
  });
}

/** A record page's Change and Delete, each shown when the key may (the delete asks first, with `confirm`). */
export function ChangeAndDelete({
  mayChange,
  mayDelete,
  onChange,
  confirm,
  remove,
}: {
  mayChange: boolean;
  mayDelete: boolean;
  onChange: () => void;
  confirm: string;
  remove: ReturnType<typeof useDelete>;
}): JSX.Element {
  return (
    <>
      {mayChange ? (
        <button type="button" onClick={onChange}>
          Change
        </button>
      ) : null}
      {mayDelete ? (
        <ConfirmButton
          key="Delete"
          label="Delete"
          confirm={confirm}
          disabled={remove.busy}
          onConfirm={() => void remove.run()}
        />
      ) : null}
    </>
  );
}

/** Why a delete was refused (a 412 with Reload), under the record's heading. */
export function DeleteProblem({ remove, reload }: { remove: ReturnType<typeof useDelete>; reload: () => void }) {
  return (
    <WriteProblem
      error={remove.error}
      context="Not deleted"
      onReload={() => {
        remove.clear();
        reload();
      }}
    />
  );
}
