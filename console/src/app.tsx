import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, exchangeForToken, onUnauthorised, setCredential, type Credential } from './api.js';
import { IdentityContext, type Identity } from './identity.js';
import { href, navigate, useRoute } from './router.js';
import { SECTIONS, type SectionEntry } from './sections/index.js';
import { Field, ProblemView } from './ui.js';

/** The console: the sign-in form until a key is accepted, then the sections the key may read. */
export function App(): JSX.Element {
  const [identity, setIdentity] = useState<Identity | undefined>(undefined);
  const [farewell, setFarewell] = useState<string | undefined>(undefined);

  const signOut = (why?: string) => {
    setCredential(undefined);
    setIdentity(undefined);
    setFarewell(why);
    navigate('#/');
  };
  useEffect(
    () => onUnauthorised(() => signOut('rowi no longer accepts the key or token you signed in with. Sign in again.')),
    [],
  );

  if (identity === undefined)
    return (
      <SignIn
        message={farewell}
        onSignedIn={(who) => {
          setFarewell(undefined);
          setIdentity(who);
        }}
      />
    );
  return (
    <IdentityContext.Provider value={identity}>
      <Shell identity={identity} onSignOut={() => signOut('You signed out: the console forgot the key.')} />
    </IdentityContext.Provider>
  );
}

function SignIn({ message, onSignedIn }: { message?: string; onSignedIn: (identity: Identity) => void }): JSX.Element {
  const [mode, setMode] = useState<'key' | 'client'>('key');
  const [key, setKey] = useState('');
  const [clientId, setClientId] = useState('');
  const [secret, setSecret] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => {
    document.title = 'Sign in · rowi console';
    first.current?.focus();
  }, [mode]);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const credential: Credential =
        mode === 'key' ? { kind: 'key', key: key.trim() } : await exchangeForToken(clientId.trim(), secret.trim());
      setCredential(credential);
      const who = await call<Identity>('/v1/callers/me');
      setKey('');
      setSecret('');
      onSignedIn(who.body);
    } catch (failure) {
      setCredential(undefined);
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in" id="content">
      <form class="panel" onSubmit={submit} aria-labelledby="sign-in-title">
        <p class="brand">rowi console</p>
        <h1 id="sign-in-title">Sign in</h1>
        {message ? (
          <p class="notice" role="status">
            {message}
          </p>
        ) : null}
        <div class="tabs" role="radiogroup" aria-label="Sign in with">
          <label>
            <input type="radio" name="mode" checked={mode === 'key'} onChange={() => setMode('key')} /> An API key
          </label>
          <label>
            <input type="radio" name="mode" checked={mode === 'client'} onChange={() => setMode('client')} /> A client
            id and secret
          </label>
        </div>
        {mode === 'key' ? (
          <Field label="API key" hint="Held in this tab's memory only: reloading or closing the tab forgets it.">
            <input
              ref={first}
              type="password"
              name="key"
              autocomplete="off"
              spellcheck={false}
              required
              value={key}
              onInput={(event) => setKey(event.currentTarget.value)}
            />
          </Field>
        ) : (
          <>
            <Field label="Client id" hint="The caller's name.">
              <input
                ref={first}
                name="client_id"
                autocomplete="off"
                spellcheck={false}
                required
                value={clientId}
                onInput={(event) => setClientId(event.currentTarget.value)}
              />
            </Field>
            <Field label="Client secret" hint="One of the caller's API keys; exchanged for a token, then forgotten.">
              <input
                type="password"
                name="client_secret"
                autocomplete="off"
                required
                value={secret}
                onInput={(event) => setSecret(event.currentTarget.value)}
              />
            </Field>
          </>
        )}
        <ProblemView
          error={error}
          context={error instanceof ApiError && error.status === 401 ? 'Not signed in' : 'Could not sign in'}
        />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

function visible(section: SectionEntry, identity: Identity): boolean {
  return (
    section.anyOf.length === 0 || section.anyOf.some((scope) => (identity.scopes as readonly string[]).includes(scope))
  );
}

function Shell({ identity, onSignOut }: { identity: Identity; onSignOut: () => void }): JSX.Element {
  const route = useRoute();
  const sections = SECTIONS.filter((section) => visible(section, identity));
  const [menuOpen, setMenuOpen] = useState(false);
  const [path = sections[0]?.path ?? 'overview', ...rest] = route.parts;
  const current = sections.find((section) => section.path === path);
  const main = useRef<HTMLElement>(null);

  // A new view: its heading takes the focus, so a keyboard or a screen reader starts there.
  useEffect(() => {
    setMenuOpen(false);
    const heading = main.current?.querySelector<HTMLElement>('h1');
    heading?.focus({ preventScroll: false });
  }, [path, rest.join('/')]);

  const groups = [...new Set(sections.map((section) => section.group))];
  return (
    <div class="shell">
      <a class="skip" href="#content" onClick={(event) => (event.preventDefault(), main.current?.focus())}>
        Skip to the content
      </a>
      <header class="topbar">
        <a class="brand" href={href('overview')}>
          rowi console
        </a>
        <button
          type="button"
          class="menu-button"
          aria-expanded={menuOpen}
          aria-controls="menu"
          onClick={() => setMenuOpen((open) => !open)}
        >
          Menu
        </button>
        <WhoAmI identity={identity} onSignOut={onSignOut} />
      </header>
      <nav id="menu" class={menuOpen ? 'menu open' : 'menu'} aria-label="Sections">
        {groups.map((group) => (
          <div class="menu-group" key={group}>
            <p class="menu-group-title">{group}</p>
            <ul>
              {sections
                .filter((section) => section.group === group)
                .map((section) => (
                  <li key={section.path}>
                    <a href={href(section.path)} aria-current={section === current ? 'page' : undefined}>
                      {section.label}
                    </a>
                  </li>
                ))}
            </ul>
          </div>
        ))}
      </nav>
      <main id="content" ref={main} tabIndex={-1}>
        {current ? (
          <current.view parts={rest} params={route.params} />
        ) : (
          <div class="view-header">
            <h1 tabIndex={-1}>Not here</h1>
            <p>
              There is no section “{path}” in the console, or the key you signed in with may not read it.{' '}
              <a href={href('overview')}>Go to Health</a>.
            </p>
          </div>
        )}
      </main>
    </div>
  );
}

const CREDENTIAL_NAMES: Record<Identity['credential'], string> = {
  api_key: 'API key',
  oauth: 'token',
  external: "external issuer's token",
};

/** Who is signed in, in the top bar; the details (scopes, record access) one press away. */
function WhoAmI({ identity, onSignOut }: { identity: Identity; onSignOut: () => void }): JSX.Element {
  const [open, setOpen] = useState(false);
  const owned = Object.entries(identity.record_access);
  return (
    <div class="who">
      <button
        type="button"
        class="who-button"
        aria-expanded={open}
        aria-controls="who-details"
        onClick={() => setOpen((value) => !value)}
      >
        <span class="who-name">{identity.name}</span>
        {identity.role ? <span class="who-role">{identity.role}</span> : null}
      </button>
      {open ? (
        <div id="who-details" class="who-details panel" role="region" aria-label="Signed in as">
          <dl>
            <dt>Caller</dt>
            <dd>
              {identity.name}
              {identity.caller_id !== null ? ` (#${identity.caller_id})` : ''}
            </dd>
            <dt>Role</dt>
            <dd>{identity.role ?? 'none (a token of another issuer)'}</dd>
            <dt>Signed in with</dt>
            <dd>{CREDENTIAL_NAMES[identity.credential]}</dd>
            {identity.user_id !== null ? (
              <>
                <dt>Acting for</dt>
                <dd>user #{identity.user_id}</dd>
              </>
            ) : null}
            <dt>Record access</dt>
            <dd>
              {owned.length === 0
                ? 'no resource has owned records'
                : owned
                    .map(([resource, access]) => `${resource}: ${access === 'all' ? 'all records' : 'its own only'}`)
                    .join('; ')}
            </dd>
            <dt>Scopes ({identity.scopes.length})</dt>
            <dd>
              <ul class="scopes">
                {identity.scopes.map((scope) => (
                  <li key={scope}>
                    <code>{scope}</code>
                  </li>
                ))}
              </ul>
            </dd>
          </dl>
        </div>
      ) : null}
      <button type="button" onClick={onSignOut}>
        Sign out
      </button>
    </div>
  );
}
