/**
 * Callers and keys (docs/security.md, docs/access.md): the callers, each one's role, grants and
 * record access, and its API keys. A new key is shown once, in this view's memory only, until the
 * operator dismisses it or leaves the page; rowi never shows it again.
 */

import type { JSX } from 'preact';
import { href, type ViewProps } from '../../router.js';
import { Header } from '../../ui.js';
import { CallerPage } from './caller.js';
import { CallerList } from './list.js';
import { NewCaller } from './new.js';
import './callers.css';

export function CallersView({ parts, params }: ViewProps): JSX.Element {
  const [first] = parts;
  if (first === undefined) return <CallerList params={params} />;
  if (first === 'new') return <NewCaller />;
  const id = Number(first);
  if (!Number.isSafeInteger(id) || id < 1 || parts.length > 1)
    return (
      <>
        <Header title="Not here" />
        <p>
          There is no such page of callers. <a href={href('callers')}>All callers</a>.
        </p>
      </>
    );
  return <CallerPage key={id} id={id} created={params.has('created')} />;
}
