/** The upload form of the imports view: a file (chosen or dropped) into a collection, POST /v1/{collection}/import. */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call } from '../../api.js';
import { bytes } from '../../format.js';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { Field, ProblemView, Section, useAction } from '../../ui.js';
import type { Operation, Target } from './shared.js';

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

export function ImportForm(): JSX.Element {
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
