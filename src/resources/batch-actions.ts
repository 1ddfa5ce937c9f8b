import type { FastifyRequest } from 'fastify';
import Type, { type TObject, type TSchema } from 'typebox';
import type { Trx } from '../db/database.js';
import type { VersionCondition } from '../http/records.js';
import { bodyOf, conditionOfEntry, recordResult, targetedEntry, type BatchAction } from './batch.js';
import type { Collection } from './collection.js';

/**
 * The members of a collection's batch (batch.ts), each made from the service function of the
 * single request it stands for, so an entry follows exactly the rules that request follows:
 * `create` (POST), `replace` (PUT), `change` (PATCH) and `delete` (DELETE) of a record by id.
 */

interface Versioned {
  id: number;
  version: number;
}

type Write<Body> = (
  trx: Trx,
  id: number,
  body: Body,
  condition: VersionCondition,
  request: FastifyRequest,
) => Promise<{ version: number }>;

/** What the answer shows of a stored record: the collection's presentation of it. */
const shown = (collection: Collection, stored: unknown) =>
  (collection.present ? collection.present(stored as never) : stored) as { version: number };

/** `create`: entries are the POST body; `targets` names the natural key (an email, a SKU) two creates may not share. */
export function createEntries<Body>(
  collection: Collection,
  body: TSchema,
  create: (trx: Trx, body: Body, request: FastifyRequest) => Promise<Versioned>,
  targets?: (entry: Body) => string[],
): BatchAction {
  return {
    member: 'create',
    action: 'create',
    method: 'POST',
    entry: body,
    ...(targets ? { targets } : {}),
    run: async (trx, entry: Body, request) => {
      const record = await create(trx, entry, request);
      return recordResult(201, `${collection.path}/${record.id}`, record, shown(collection, record));
    },
  };
}

/** `replace` (PUT) or `change` (PATCH): entries are `{id, if_match?, …the body}`. */
export function writeEntries<Body>(
  collection: Collection,
  kind: 'replace' | 'change',
  body: TObject,
  write: Write<Body>,
  targets: (entry: Body & { id: number }) => string[] = (entry) => [`id:${entry.id}`],
): BatchAction {
  return {
    member: kind,
    action: 'update',
    method: kind === 'replace' ? 'PUT' : 'PATCH',
    entry: targetedEntry(body, `${collection.singular}Batch${kind === 'replace' ? 'Replace' : 'Change'}`),
    targets,
    run: async (trx, entry: Body & { id: number; if_match?: string }, request) => {
      const stored = await write(trx, entry.id, bodyOf(entry) as Body, conditionOfEntry(entry), request);
      return recordResult(200, `${collection.path}/${entry.id}`, stored, shown(collection, stored));
    },
  };
}

/** `delete`: entries are `{id, if_match?}`. */
export function deleteEntries(
  collection: Collection,
  remove: (trx: Trx, id: number, condition: VersionCondition, request: FastifyRequest) => Promise<void>,
): BatchAction {
  return {
    member: 'delete',
    action: 'delete',
    method: 'DELETE',
    entry: targetedEntry(Type.Object({}), `${collection.singular}BatchDelete`),
    targets: (entry: { id: number }) => [`id:${entry.id}`],
    run: async (trx, entry: { id: number; if_match?: string }, request) => {
      await remove(trx, entry.id, conditionOfEntry(entry), request);
      return { status: 204, location: `${collection.path}/${entry.id}` };
    },
  };
}
