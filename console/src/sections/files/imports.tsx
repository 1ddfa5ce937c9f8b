/** The imports view: the upload form and the recent operations, or one operation's page (#/imports/{id}). */
import type { JSX } from 'preact';
import { useCan } from '../../identity.js';
import { href } from '../../router.js';
import { Header, Section } from '../../ui.js';
import type { ViewProps } from '../../router.js';
import { ImportForm } from './import-form.js';
import { OperationView } from './operation.js';
import { OperationList } from './operation-list.js';
import './files.css';

export function ImportsView({ parts }: ViewProps): JSX.Element {
  const can = useCan();
  const id = parts[0] === undefined ? undefined : Number(parts[0]);
  if (id !== undefined) {
    if (!Number.isInteger(id) || id < 1)
      return (
        <>
          <Header title="Not here" />
          <p>
            There is no operation by that address. <a href={href('imports')}>Back to imports</a>
          </p>
        </>
      );
    return <OperationView key={id} id={id} />;
  }
  return (
    <>
      <Header title="Imports" />
      <p class="lede">
        Load a CSV or NDJSON file into a collection. rowi writes it in the background and this page follows it row by
        row; a dry run checks every row and stores nothing.
      </p>
      <ImportForm />
      {can('operations:read') ? (
        <Section title="Recent operations">
          <OperationList />
        </Section>
      ) : null}
    </>
  );
}
