import Type, { type TOptional, type TProperties } from 'typebox';
import { pageSchema } from '../http/paging.js';
import { EchoedReadOnly, RecordFields, closedObject } from '../http/schemas.js';
import { EchoedCreatedBy, OwnedFields } from './ownership.js';

/** Every field of `fields`, optional: what a JSON Merge Patch may leave out. */
type Optional<Fields extends TProperties> = { [Field in keyof Fields]: TOptional<Fields[Field]> };

const optional = <Fields extends TProperties>(fields: Fields) =>
  Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, Type.Optional(schema)])) as Optional<Fields>;

/**
 * The schemas of an owned resource whose records are its writable fields and nothing more (users,
 * items, a resource declared in a test), named `title` in the OpenAPI document and `element` in
 * XML: the record as answered (its id, the writable fields, its owner and times), a page of them,
 * and the bodies of its writes. A create takes the writable fields; a replace takes them too and
 * may echo the read-only ones as read (422 read-only-field when one differs); a change (JSON Merge
 * Patch) takes any of them, and null would remove a required field, so it is refused.
 */
export function ownedRecordSchemas<Writable extends TProperties>(
  element: string,
  title: string,
  plural: string,
  writable: Writable,
) {
  const record = Type.Object({ id: RecordFields.id, ...writable, ...OwnedFields }, closedObject(element, title));
  return {
    record,
    page: pageSchema(record, plural),
    create: Type.Object(writable, closedObject(element, `${title}Create`)),
    replace: Type.Object(
      { ...writable, ...EchoedReadOnly, ...EchoedCreatedBy },
      closedObject(element, `${title}Replace`),
    ),
    patch: Type.Object(
      { ...optional(writable), ...EchoedReadOnly, ...EchoedCreatedBy },
      closedObject(element, `${title}Patch`),
    ),
  };
}
