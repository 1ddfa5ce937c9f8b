/**
 * What the files views share: the operations and backups rowi answers with, an operation's status
 * badge and words, and `useOperation` (an operation followed until it ends). It imports no view.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get } from '../../api.js';
import { Badge } from '../../ui.js';

// ————————————————————————————————————————— what rowi answers

export type Status = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';
export type Target = 'users' | 'items' | 'stock' | 'orders';

export interface RowError {
  row: number;
  field: string | null;
  problem: string;
  detail: string;
}

export interface Backup {
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

export interface OperationBase {
  id: number;
  status: Status;
  created_by: number | null;
  caller_name: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface ImportOperation extends OperationBase {
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

export interface BackupOperation extends OperationBase {
  kind: 'backup';
  summary: {
    detail: string;
    backup: Backup | null;
    problem: { type: string; status: number } | null;
  } | null;
}

export type Operation = ImportOperation | BackupOperation;

export const unfinished = (status: Status) => status === 'queued' || status === 'running';

export const STATUS_TONE: Record<Status, 'good' | 'bad' | 'warn' | 'neutral'> = {
  queued: 'neutral',
  running: 'warn',
  succeeded: 'good',
  failed: 'bad',
  cancelled: 'neutral',
};

export function StatusBadge({ status }: { status: Status }): JSX.Element {
  return <Badge tone={STATUS_TONE[status]}>{status}</Badge>;
}

export const TARGET_LABEL: Record<Target, string> = {
  users: 'Users',
  items: 'Items',
  stock: 'Stock levels',
  orders: 'Orders',
};

// ————————————————————————————————————————— following an operation

/**
 * The operation `id`, read again every second while it is queued or running; the reads stop once
 * it has ended and when the view is left.
 */
export function useOperation(id: number | undefined): {
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

export function statusWords(operation: Operation): string {
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
