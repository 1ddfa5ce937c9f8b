/** A caller's API keys: the list, issuing one (shown once, here), revoking one. */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call } from '../../api.js';
import { useCan } from '../../identity.js';
import {
  Badge,
  ConfirmButton,
  CopyButton,
  Field,
  Notice,
  PagedTable,
  ProblemView,
  Section,
  Time,
  useAction,
  usePaged,
  type Column,
} from '../../ui.js';
import type { ApiKey, Caller, NewApiKey } from './model.js';
import { CallerProblem } from './shared.js';

function keyState(key: ApiKey): JSX.Element {
  if (key.revoked_at !== null) return <Badge tone="bad">revoked</Badge>;
  if (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()) return <Badge tone="warn">expired</Badge>;
  return <Badge tone="good">working</Badge>;
}

export function KeysPanel({ caller }: { caller: Caller }): JSX.Element {
  const can = useCan();
  const keys = usePaged<ApiKey>(`/v1/callers/${caller.id}/keys`, { limit: 20, sort: '-id' });
  const [fresh, setFresh] = useState<NewApiKey | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [description, setDescription] = useState('');
  const [expires, setExpires] = useState('');
  const secretBox = useRef<HTMLDivElement>(null);

  const issue = useAction(async () => {
    setNotice(undefined);
    const body: Record<string, string> = {};
    if (description.trim() !== '') body.description = description.trim();
    if (expires !== '') {
      const at = new Date(expires);
      if (Number.isNaN(at.getTime())) throw new Error('The expiry is not a date and time.');
      body.expires_at = at.toISOString();
    }
    const answer = await call<NewApiKey>(`/v1/callers/${caller.id}/keys`, { method: 'POST', body });
    setFresh(answer.body);
    setDescription('');
    setExpires('');
    keys.reload();
  });
  const revoke = useAction(async (key: ApiKey) => {
    setNotice(undefined);
    await call(`/v1/callers/${caller.id}/keys/${key.id}`, { method: 'DELETE' });
    if (fresh?.id === key.id) setFresh(undefined);
    setNotice(`Key ${key.prefix} was revoked: rowi refuses it from now on.`);
    keys.reload();
  });

  useEffect(() => {
    if (fresh) secretBox.current?.focus();
  }, [fresh]);

  const columns: Column<ApiKey>[] = [
    { label: 'Prefix', render: (key) => <code>{key.prefix}</code> },
    { label: 'Description', render: (key) => key.description || '—' },
    { label: 'State', render: keyState },
    { label: 'Last used', render: (key) => (key.last_used_at === null ? 'never' : <Time at={key.last_used_at} />) },
    { label: 'Created', optional: true, render: (key) => <Time at={key.created_at} /> },
    {
      label: 'Expires',
      optional: true,
      render: (key) => (key.expires_at === null ? 'never' : <Time at={key.expires_at} />),
    },
    {
      label: 'Revoked',
      optional: true,
      render: (key) => (key.revoked_at === null ? '—' : <Time at={key.revoked_at} />),
    },
  ];
  if (can('callers:delete'))
    columns.push({
      label: 'Actions',
      render: (key) =>
        key.revoked_at === null ? (
          <ConfirmButton
            key="Revoke"
            label="Revoke"
            confirm={`Revoke key ${key.prefix}?`}
            disabled={revoke.busy}
            onConfirm={() => void revoke.run(key)}
          />
        ) : null,
    });

  return (
    <Section title="API keys">
      {fresh ? (
        <div class="secret callers-secret" role="region" aria-label="The new key" tabIndex={-1} ref={secretBox}>
          <p class="callers-warning">
            <strong>Copy it now: rowi does not show it again.</strong> It keeps only a hash; a lost key is revoked and
            replaced, never shown.
          </p>
          <p class="callers-key">
            New key {fresh.prefix}
            {fresh.description ? ` (${fresh.description})` : ''} for {caller.name}:{' '}
            <code aria-label="The new key's secret">{fresh.key}</code>
          </p>
          <div class="actions">
            <CopyButton text={fresh.key} label="Copy the key" />
            <button type="button" onClick={() => setFresh(undefined)}>
              I have copied it: hide it
            </button>
          </div>
        </div>
      ) : null}
      <Notice>{notice}</Notice>
      <CallerProblem error={revoke.error} context="The key was not revoked" />
      <div class="callers-keys-bar">
        <p class="field-hint">
          The keys themselves are never listed: rowi keeps only a hash. Last use is recorded within a few seconds.
        </p>
        <button type="button" onClick={keys.reload} disabled={keys.loading}>
          Refresh the keys
        </button>
      </div>
      <div class="callers-keys">
        <PagedTable
          paged={keys}
          caption={`Keys of ${caller.name}`}
          columns={columns}
          rowKey={(key) => key.id}
          empty="No keys: this caller cannot sign requests yet."
        />
      </div>
      {can('callers:create') ? (
        <form
          class="form callers-issue"
          aria-label="Issue a key"
          onSubmit={(event) => {
            event.preventDefault();
            void issue.run();
          }}
        >
          <h3>Issue a key</h3>
          <div class="form-row">
            <Field label="Description" hint="What the key is for (web-shop production); up to 200 characters.">
              <input
                name="description"
                maxLength={200}
                autocomplete="off"
                value={description}
                onInput={(event) => setDescription(event.currentTarget.value)}
              />
            </Field>
            <Field label="Expires" hint="Optional, in your time zone; empty: never.">
              <input
                name="expires_at"
                type="datetime-local"
                value={expires}
                onInput={(event) => setExpires(event.currentTarget.value)}
              />
            </Field>
          </div>
          <ProblemView error={issue.error} context="No key was issued" />
          <div class="actions">
            <button type="submit" class="primary" disabled={issue.busy}>
              {issue.busy ? 'Issuing…' : 'Issue a key'}
            </button>
          </div>
        </form>
      ) : null}
    </Section>
  );
}
