import Type, { type Static, type TObject, type TSchema } from 'typebox';
import { sightOnCollection } from '../../auth/visibility.js';
import { bodyOf, conditionOfEntry, recordResult, targetedEntry, type BatchAction } from './batch.js';
import {
  presented,
  type Collection,
  type CreateSpec,
  type DeleteSpec,
  type Validated,
  type Write,
} from '../collection.js';

/**
 * The members of a collection's batch (engine/batches/batch.ts), each made from the service function of the
 * single request it stands for, so an entry follows exactly the rules that request follows:
 * `create` (POST), `replace` (PUT), `change` (PATCH) and `delete` (DELETE) of a record by id. An
 * entry's fields are what the single request's body schema validates, so the service function is
 * handed them as that request's body (`Validated`, which TypeScript cannot resolve for a schema not
 * yet known).
 */

interface Versioned {
  id: number;
  version: number;
}

/** An entry that names its record, with the fields of the single request's body. */
type Targeted<Body> = Body & { id: number; if_match?: string };

/** `create`: entries are the POST body; `targets` names the natural key (an email, a SKU) two creates may not share. */
export function createEntries<Record extends TSchema, Stored extends Versioned, Body extends TSchema>(
  collection: Collection<Record, Stored>,
  body: Body,
  create: CreateSpec<Stored, Body>['create'],
  targets?: (entry: Static<Body>) => string[],
): BatchAction<Body> {
  return {
    member: 'create',
    action: 'create',
    method: 'POST',
    entry: body,
    ...(targets ? { targets } : {}),
    run: async (trx, entry, context) => {
      const record = await create(trx, entry as Validated<Body>, context);
      return recordResult(201, `${collection.path}/${record.id}`, record, presented(collection, record));
    },
  };
}

/** `replace` (PUT) or `change` (PATCH): entries are `{id, if_match?, …the body}`. */
export function writeEntries<Record extends TSchema, Stored extends { version: number }, Body extends TObject>(
  collection: Collection<Record, Stored>,
  kind: 'replace' | 'change',
  body: Body,
  write: Write<Body, Stored>,
  targets: (entry: Targeted<Static<Body>>) => string[] = (entry) => [`id:${entry.id}`],
): BatchAction {
  return {
    member: kind,
    action: 'update',
    method: kind === 'replace' ? 'PUT' : 'PATCH',
    entry: targetedEntry(body, `${collection.singular}Batch${kind === 'replace' ? 'Replace' : 'Change'}`),
    targets,
    run: async (trx, entry: Targeted<Static<Body>>, context) => {
      const sight = sightOnCollection(context.access, collection.name);
      const fields = bodyOf(entry) as Validated<Body>;
      const stored = await write(trx, entry.id, fields, conditionOfEntry(entry), sight, context);
      return recordResult(200, `${collection.path}/${entry.id}`, stored, presented(collection, stored));
    },
  };
}

/** `delete`: entries are `{id, if_match?}`. */
export function deleteEntries<Record extends TSchema, Stored>(
  collection: Collection<Record, Stored>,
  remove: DeleteSpec['remove'],
): BatchAction {
  return {
    member: 'delete',
    action: 'delete',
    method: 'DELETE',
    entry: targetedEntry(Type.Object({}), `${collection.singular}BatchDelete`),
    targets: (entry: { id: number }) => [`id:${entry.id}`],
    run: async (trx, entry: { id: number; if_match?: string }, context) => {
      await remove(trx, entry.id, conditionOfEntry(entry), sightOnCollection(context.access, collection.name), context);
      return { status: 204, location: `${collection.path}/${entry.id}` };
    },
  };
}
