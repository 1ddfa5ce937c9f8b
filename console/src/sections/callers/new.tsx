/** A new caller: the form, then the caller's page, where its first key is issued. */
import type { JSX } from 'preact';
import { call } from '../../api.js';
import { useCan } from '../../identity.js';
import { href, navigate } from '../../router.js';
import { Header, ProblemView, Section, useLoad } from '../../ui.js';
import { CallerForm } from './form.js';
import { loadCatalogue, type Caller } from './model.js';

export function NewCaller(): JSX.Element {
  const can = useCan();
  const known = useLoad(() => loadCatalogue(), []);
  return (
    <>
      <Header title="New caller" />
      <p>
        <a href={href('callers')}>All callers</a>
      </p>
      {!can('callers:create') ? (
        <p>The key you signed in with may not create callers (scope callers:create).</p>
      ) : (
        <Section title="The caller">
          <p class="stat-note callers-intro">Then issue it a key on its page: the key is shown there once.</p>
          <ProblemView error={known.error} context="Could not read the roles and scopes from the API description" />
          {known.data ? (
            <CallerForm
              catalogue={known.data}
              submitLabel="Create the caller"
              onSubmit={async (body) => {
                const created = await call<Caller>('/v1/callers', { method: 'POST', body });
                navigate(href('callers', created.body.id, { created: 1 }));
              }}
            />
          ) : known.loading ? (
            <p>Loading the roles and scopes…</p>
          ) : null}
        </Section>
      )}
    </>
  );
}
