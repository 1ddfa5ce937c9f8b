import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { byResource } from './model.js';

/** A list of scopes to tick, folded away until opened; its summary says what is ticked. */
export function ScopeChoice({
  id,
  legend,
  hint,
  scopes,
  chosen,
  onChange,
}: {
  id: string;
  legend: string;
  hint: string;
  scopes: string[];
  chosen: string[];
  onChange: (chosen: string[]) => void;
}): JSX.Element {
  const [open, setOpen] = useState(chosen.length > 0);
  return (
    <details class="callers-scopes" open={open} onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary>
        {legend}: {chosen.length === 0 ? 'none' : chosen.join(', ')}
      </summary>
      <fieldset class="callers-fieldset" aria-describedby={`${id}-hint`}>
        <legend class="visually-hidden">{legend}</legend>
        <p class="field-hint" id={`${id}-hint`}>
          {hint}
        </p>
        <div class="callers-groups">
          {byResource(scopes).map(([resource, group]) => (
            <div class="callers-group" key={resource} role="group" aria-label={`${legend}: ${resource}`}>
              {group.map((scope) => (
                <label key={scope} class="callers-check">
                  <input
                    type="checkbox"
                    name={`${id}-${scope}`}
                    checked={chosen.includes(scope)}
                    onChange={(event) =>
                      onChange(
                        event.currentTarget.checked
                          ? scopes.filter((one) => one === scope || chosen.includes(one))
                          : chosen.filter((one) => one !== scope),
                      )
                    }
                  />{' '}
                  <code>{scope}</code>
                </label>
              ))}
            </div>
          ))}
        </div>
      </fieldset>
    </details>
  );
}
