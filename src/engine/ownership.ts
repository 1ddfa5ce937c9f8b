import Type from 'typebox';
import type { FilterSpec } from '../http/paging.js';
import { Id, RecordFields } from '../http/schemas.js';

/**
 * What users, items and orders say of their owner, the caller that created them (docs/access.md):
 * the read-only `created_by` field, its echo in a PUT or PATCH body, and the `created_by` filter
 * with which a caller that sees all records lists one owner's.
 */
export const CreatedBy = Type.Union(
  [Type.Integer({ ...Id, description: 'the id of the caller that created it' }), Type.Null()],
  {
    readOnly: true,
    description:
      "the caller that created it, its owner (docs/access.md); null when an external issuer's subject created it, or it predates owners and there was no admin to assign it to",
  },
);

/** The last fields of an owned record as answered: its owner, and when it was made and last changed. */
export const OwnedFields = {
  created_by: CreatedBy,
  created_at: RecordFields.created_at,
  updated_at: RecordFields.updated_at,
};

/** created_by as a PUT or PATCH body may echo it. */
export const EchoedCreatedBy = { created_by: Type.Optional(CreatedBy) };

export const CREATED_BY_FILTER: Record<string, FilterSpec> = {
  created_by: {
    schema: Type.Integer({ ...Id, description: 'only records created by this caller' }),
    column: 'created_by',
    operator: '=',
  },
};

/** ['created_by'] when the body echoes another owner than the stored one (422 read-only-field), else []. */
export function createdByDiffers(
  stored: { created_by: number | null },
  body: { created_by?: number | null },
): string[] {
  return body.created_by !== undefined && body.created_by !== stored.created_by ? ['created_by'] : [];
}
