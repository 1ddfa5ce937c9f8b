/** One caller's page: what it is and holds, its keys, the form to change it, deleting it. */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { call } from '../../api.js';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { ConfirmButton, Header, Notice, ProblemView, Section, Time, useAction, useLoad } from '../../ui.js';
import { CallerForm } from './form.js';
import { KeysPanel } from './keys.js';
import { loadCatalogue, type Caller } from './model.js';
import { CallerProblem, ScopeList } from './shared.js';

export function CallerPage({ id, created }: { id: number; created: boolean }): JSX.Element {
  const can = useCan();
  const loaded = useLoad((signal) => call<Caller>(`/v1/callers/${id}`, { signal }), [id]);
  const known = useLoad(() => loadCatalogue(), []);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const removal = useAction(async (etag: string | null) => {
    await call(`/v1/callers/${id}`, { method: 'DELETE', ifMatch: etag });
    navigate(href('callers', { deleted: id }));
  });
  const caller = loaded.data?.body;
  const etag = loaded.data?.etag ?? null;

  if (caller === undefined)
    return (
      <>
        <Header title={`Caller #${id}`} />
        <p>
          <a href={href('callers')}>All callers</a>
        </p>
        {loaded.loading ? (
          <p>Loading…</p>
        ) : (
          <ProblemView error={loaded.error} context={`Could not read caller #${id}`} />
        )}
      </>
    );

  return (
    <>
      <Header title={caller.name}>
        {can('callers:delete') ? (
          <ConfirmButton
            key="Delete caller"
            label="Delete caller"
            confirm="Delete this caller and all its keys?"
            disabled={removal.busy}
            onConfirm={() => void removal.run(etag)}
          />
        ) : null}
      </Header>
      <p>
        <a href={href('callers')}>All callers</a>
      </p>
      {created ? <Notice>Caller {caller.name} was created. Issue it a key below.</Notice> : null}
      <Notice>{saved}</Notice>
      <CallerProblem error={removal.error} context="The caller was not deleted" />
      <div class="callers-overview">
        <Section title="The caller">
          <dl class="record">
            <dt>Id</dt>
            <dd>{caller.id}</dd>
            <dt>Name</dt>
            <dd>{caller.name}</dd>
            <dt>Role</dt>
            <dd>{caller.role}</dd>
            <dt>Record access</dt>
            <dd>
              {Object.entries(caller.record_access)
                .map(([resource, access]) => `${resource}: ${access === 'all' ? 'all records' : 'its own only'}`)
                .join('; ') || 'no resource has owned records'}
            </dd>
            <dt>Extra scopes</dt>
            <dd>
              <ScopeList scopes={caller.extra_scopes} />
            </dd>
            <dt>Removed scopes</dt>
            <dd>
              <ScopeList scopes={caller.removed_scopes} />
            </dd>
            <dt>Rate limit</dt>
            <dd>
              {caller.rate_limit === null ? 'the role’s default' : `${caller.rate_limit.toLocaleString()} a minute`}
            </dd>
            <dt>Created</dt>
            <dd>
              <Time at={caller.created_at} />
            </dd>
            <dt>Changed</dt>
            <dd>
              <Time at={caller.updated_at} />
            </dd>
          </dl>
        </Section>
        <Section title={`Scopes it holds (${caller.scopes.length})`}>
          <p class="field-hint">Its role’s, plus the extra scopes, less the removed ones.</p>
          <ScopeList scopes={caller.scopes} />
        </Section>
      </div>
      <KeysPanel caller={caller} />
      {can('callers:update') ? (
        <Section title="Change the caller">
          <ProblemView error={known.error} context="Could not read the roles and scopes from the API description" />
          {known.data ? (
            <CallerForm
              key={etag ?? caller.updated_at}
              catalogue={known.data}
              before={caller}
              submitLabel="Save the changes"
              onSubmit={async (body) => {
                setSaved(undefined);
                await call<Caller>(`/v1/callers/${id}`, { method: 'PATCH', body, ifMatch: etag });
                setSaved(`Saved: ${Object.keys(body).join(', ').replaceAll('_', ' ')} changed.`);
                loaded.reload();
              }}
              onReload={() => {
                setSaved(undefined);
                loaded.reload();
              }}
            />
          ) : null}
        </Section>
      ) : null}
    </>
  );
}
