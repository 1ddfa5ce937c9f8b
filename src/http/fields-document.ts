import { SELECTS, type SelectedRecord } from './fields.js';

/**
 * What the OpenAPI document says an operation that takes `fields` answers (docs/reading.md "Only
 * the fields asked for"): its records with every member or only those named, the identifier
 * always. A client or a proxy that validates answers against the document must accept both, so
 * where such an operation's successful answers hold the record (itself, a page of it, the lines
 * of its NDJSON export), the document names a variant of it, `<Record>Fields`: the same members,
 * bounds and XML names, none required but the identifier, and nothing required inside them (a
 * dotted name keeps part of a line, of an embedded record). Generated clients get one plain type
 * with optional members, which every generator handles; a union of the whole and the partial
 * record would add nothing to it (every whole record is a partial one) and some generators
 * handle unions of objects poorly.
 *
 * Only the document says so: the route's own schemas, which validate and serialise, are unchanged.
 */
type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The member of a variant that carries the whole record it stands for, through @fastify/swagger's
 * conversion of the route's schemas, to nameComponents, which names it (the document keeps the
 * record as a named schema, what other operations answer and a type the clients' code names, even
 * where every answer of it may be partial) and drops the member.
 */
export const WHOLE_RECORD = 'x-whole-record';

/** The route's schema as the document describes it (the @fastify/swagger transform of every route). */
export function describeSelections(schema: Json | undefined, url: string): Json | undefined {
  const querystring = schema?.querystring as { properties?: Record<string, unknown> } | undefined;
  const selected = (querystring?.properties?.fields as { [SELECTS]?: SelectedRecord } | undefined)?.[SELECTS];
  if (schema === undefined || selected === undefined || !isObject(schema.response)) return schema;
  const record = selected.record as unknown as Json;
  const variant = partialRecord(record, selected.identifier);
  let found = false;
  const response = Object.fromEntries(
    Object.entries(schema.response).map(([status, answer]) => {
      if (Number(status) >= 300 || !isObject(answer) || !isObject(answer.content)) return [status, answer];
      const content = Object.fromEntries(
        Object.entries(answer.content).map(([media, described]) => {
          if (!isObject(described)) return [media, described];
          const replaced = replaceRecord(described.schema, record, variant);
          found ||= replaced !== described.schema;
          return [media, { ...described, schema: replaced }];
        }),
      );
      return [status, { ...answer, content }];
    }),
  );
  // A route that takes fields but whose answer does not hold its record is a mistake: the document would lie.
  if (!found) throw new Error(`${url} takes fields, but its answers hold no ${String(record.title ?? 'record')}`);
  return { ...schema, response };
}

/** `schema` with every occurrence of the record (itself, or a copy of it under its title) replaced by `variant`. */
function replaceRecord(schema: unknown, record: Json, variant: Json): unknown {
  if (!isObject(schema)) return schema;
  if (schema === record || (record.title !== undefined && schema.title === record.title)) return variant;
  let changed = false;
  const copy: Json = {};
  for (const [key, member] of Object.entries(schema)) {
    const replaced =
      key === 'properties' && isObject(member)
        ? mapValues(member, (each) => replaceRecord(each, record, variant))
        : key === 'items'
          ? replaceRecord(member, record, variant)
          : key === 'anyOf' && Array.isArray(member)
            ? member.map((each) => replaceRecord(each, record, variant))
            : member;
    changed ||= !sameMembers(replaced, member);
    copy[key] = replaced;
  }
  return changed ? copy : schema;
}

/** The record with its identifier required and nothing else: each branch of a union likewise. */
function partialRecord(record: Json, identifier: string | undefined): Json {
  const title = typeof record.title === 'string' ? `${record.title}Fields` : undefined;
  const { required: _required, ...rest } = record;
  return {
    ...rest,
    ...(title === undefined ? {} : { [WHOLE_RECORD]: record }),
    ...(title === undefined ? {} : { title }),
    description: `${typeof record.description === 'string' ? `${record.description}; ` : ''}as a read or a list answers it: every member, or only those \`fields\` names${identifier === undefined ? '' : ` (${identifier} always)`}`,
    ...(Array.isArray(record.anyOf)
      ? { anyOf: record.anyOf.map((branch) => partialRecord(branch as Json, identifier)) }
      : {}),
    ...(isObject(record.properties)
      ? {
          properties: mapValues(record.properties, optionalInside),
          ...(identifier !== undefined && Object.hasOwn(record.properties, identifier)
            ? { required: [identifier] }
            : {}),
        }
      : {}),
  };
}

/**
 * A member with nothing required inside it. A titled object that changes is another schema now:
 * `Partial<Title>` (an order's line, a user embedded in an order), named once in the document
 * however many variants hold it.
 */
function optionalInside(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  let changed = 'required' in schema;
  const copy: Json = {};
  for (const [key, member] of Object.entries(schema)) {
    if (key === 'required') continue;
    const inner =
      key === 'properties' && isObject(member)
        ? mapValues(member, optionalInside)
        : key === 'items'
          ? optionalInside(member)
          : key === 'anyOf' && Array.isArray(member)
            ? member.map(optionalInside)
            : member;
    changed ||= !sameMembers(inner, member);
    copy[key] = inner;
  }
  if (!changed) return schema;
  if (typeof copy.title === 'string') copy.title = `Partial${copy.title}`;
  return copy;
}

function mapValues(object: Json, map: (value: unknown) => unknown): Json {
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, map(value)]));
}

/** Whether a rewritten member is the one it came from (a map or list rewritten member by member counts as the same when each is). */
function sameMembers(after: unknown, before: unknown): boolean {
  if (after === before) return true;
  if (Array.isArray(after) && Array.isArray(before))
    return after.length === before.length && after.every((each, index) => each === before[index]);
  if (isObject(after) && isObject(before))
    return (
      Object.keys(after).length === Object.keys(before).length &&
      Object.entries(after).every(([key, value]) => value === before[key])
    );
  return false;
}
