/** Pieces the caller views share: a problem with rowi's rule explained, a list of scopes. */
import type { JSX } from 'preact';
import { ApiError } from '../../api.js';
import { ProblemView } from '../../ui.js';

/** A problem of this section, with what rowi's rule means where the frame does not say. */
export function CallerProblem({ error, context }: { error: unknown; context: string }): JSX.Element | null {
  if (error === undefined) return null;
  return (
    <>
      <ProblemView error={error} context={context} />
      {error instanceof ApiError && error.kind === 'last-admin' ? (
        <p class="callers-explained">
          rowi always keeps one caller that can manage callers: an admin that holds callers:read and callers:update and
          has a working key. Make another caller an admin and issue it a key first; then this change can be made.
        </p>
      ) : null}
    </>
  );
}

export function ScopeList({ scopes }: { scopes: string[] }): JSX.Element {
  if (scopes.length === 0) return <span>none</span>;
  return (
    <ul class="scopes">
      {scopes.map((scope) => (
        <li key={scope}>
          <code>{scope}</code>
        </li>
      ))}
    </ul>
  );
}
