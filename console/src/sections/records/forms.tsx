/** The forms changing a record (PATCH with If-Match) and creating one (POST). */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import type { Answer } from '../../api.js';
import { Field, ProblemView, Section, useAction } from '../../ui.js';
import { WriteProblem } from './common.js';
import type { Owned } from './types.js';

export interface EditSpec {
  name: string;
  label: string;
  kind: 'text' | 'email' | 'money' | 'id';
  hint?: string;
  maxLength?: number;
}

/**
 * A form of a record's editable fields, sent as PATCH (merge patch) with only the fields that
 * changed, and If-Match with the ETag read with the record.
 */
export function ChangeForm<T extends Owned>({
  title,
  record,
  fields,
  save,
  onSaved,
  onReload,
  onClose,
}: {
  title: string;
  record: T;
  fields: EditSpec[];
  save: (patch: Record<string, unknown>) => Promise<Answer<T>>;
  onSaved: (answer: Answer<T>) => void;
  onReload: () => void;
  onClose: () => void;
}): JSX.Element {
  const initial = () => {
    const values: Record<string, string> = {};
    for (const field of fields) {
      const value = (record as unknown as Record<string, unknown>)[field.name];
      values[field.name] = value === null || value === undefined ? '' : String(value);
    }
    return values;
  };
  const [values, setValues] = useState(initial);
  const [unchanged, setUnchanged] = useState(false);
  const action = useAction(save);
  const submit = async (event: Event) => {
    event.preventDefault();
    const before = initial();
    const patch: Record<string, unknown> = {};
    for (const field of fields) {
      const value = values[field.name] ?? '';
      if (value === before[field.name]) continue;
      patch[field.name] = field.kind === 'id' ? Number(value) : field.kind === 'text' ? value : value.trim();
    }
    if (Object.keys(patch).length === 0) {
      setUnchanged(true);
      return;
    }
    setUnchanged(false);
    const answer = await action.run(patch);
    if (answer !== undefined) onSaved(answer);
  };
  return (
    <Section title={title}>
      <form class="form" onSubmit={submit}>
        {fields.map((field) => (
          <Field key={field.name} label={field.label} hint={field.hint}>
            <input
              name={field.name}
              type={field.kind === 'email' ? 'email' : field.kind === 'id' ? 'number' : 'text'}
              inputMode={field.kind === 'money' ? 'decimal' : field.kind === 'id' ? 'numeric' : undefined}
              min={field.kind === 'id' ? 1 : undefined}
              required
              maxLength={field.maxLength}
              class={field.kind === 'text' || field.kind === 'email' ? 'records-wide-input' : undefined}
              value={values[field.name]}
              onInput={(event) => {
                const value = event.currentTarget.value;
                setValues((previous) => ({ ...previous, [field.name]: value }));
              }}
            />
          </Field>
        ))}
        {unchanged ? <p class="field-hint">Nothing was changed, so nothing was sent.</p> : null}
        <WriteProblem error={action.error} context="Not saved" onReload={onReload} />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? 'Saving…' : 'Save changes'}
          </button>
          <button type="button" onClick={onClose}>
            Close without saving
          </button>
        </div>
      </form>
    </Section>
  );
}

/** A form creating a record (POST); opens the new record. */
export function CreateForm({
  title,
  fields,
  create,
  onClose,
}: {
  title: string;
  fields: EditSpec[];
  create: (body: Record<string, string>) => Promise<void>;
  onClose: () => void;
}): JSX.Element {
  const [values, setValues] = useState<Record<string, string>>({});
  const action = useAction(create);
  return (
    <Section title={title}>
      <form
        class="form"
        onSubmit={(event) => {
          event.preventDefault();
          const body: Record<string, string> = {};
          for (const field of fields)
            body[field.name] = field.kind === 'text' ? (values[field.name] ?? '') : (values[field.name] ?? '').trim();
          void action.run(body);
        }}
      >
        {fields.map((field) => (
          <Field key={field.name} label={field.label} hint={field.hint}>
            <input
              name={field.name}
              type={field.kind === 'email' ? 'email' : 'text'}
              inputMode={field.kind === 'money' ? 'decimal' : undefined}
              required
              maxLength={field.maxLength}
              class={field.kind === 'text' || field.kind === 'email' ? 'records-wide-input' : undefined}
              value={values[field.name] ?? ''}
              onInput={(event) => {
                const value = event.currentTarget.value;
                setValues((previous) => ({ ...previous, [field.name]: value }));
              }}
            />
          </Field>
        ))}
        <ProblemView error={action.error} context="Not created" />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? 'Creating…' : 'Create'}
          </button>
          <button type="button" onClick={onClose}>
            Close
          </button>
        </div>
      </form>
    </Section>
  );
}
