import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TSchema } from 'typebox';
import { BadRequestError } from '../errors.js';
import { memberCopier, projector, structureOf, type CsvColumn, type Shape } from './export-shapes.js';
import { MEDIA_TYPES } from './negotiate.js';
import { branchFor } from './schema-branches.js';

/**
 * Only the fields asked for (docs/reading.md "Only the fields asked for"): `fields=id,name,lines.quantity`
 * on a read or a list answers each record with those members only, in every representation. A
 * dotted name selects inside an object or an array of objects (an order's `lines.quantity`); a name
 * of a structure selects all of it. The record's identifier is always answered. A name given twice
 * counts once. What a selection keeps is always a part of what the record holds as answered: it
 * never reveals a member the record's schema does not have, nor a record the caller may not see.
 *
 * A field set is parsed once and kept (a bounded number per record schema), so a request that
 * repeats a common set costs a lookup; a request without `fields` costs nothing here.
 */
export const FIELDS_LIMITS = { names: 100, length: 2000 } as const;

/** How many parsed field sets are kept per record schema; the oldest goes first. */
const KEPT_PER_RECORD = 256;

/** The records of an operation, as `fields` selects in them. */
export interface Selectable {
  record: TSchema;
  /** The member that identifies a record, always answered: `id` unless the record has another (stock: item_id). */
  identifier?: string;
  /**
   * The member paths that hold a record embedded by `expand=` (user, lines.item), present only when
   * expand names them: a name inside one (user.email) is taken, and the selection says it reaches
   * it, so that the operation can refuse it when the request does not expand it.
   */
  embedded?: readonly string[];
}

/** A field set asked for. */
export interface FieldSelection {
  /** A digest of the set, part of the representation's ETag (equal sets, however written, have one). */
  tag: string;
  /** The record with the selected members only, in its schema's order, nested ones likewise. */
  pick: (record: unknown) => unknown;
  /** Whether an export column (a member, or a member inside one) is selected. */
  selects: (column: CsvColumn) => boolean;
  /** The embedded records (Selectable.embedded) the names select in or name, each with the first name that does. */
  reaches: readonly { path: string; name: string }[];
}

/** The names selected: a name maps to all of it (true) or to the names selected inside it. */
type Tree = Map<string, Tree | true>;

/**
 * What a `fields` parameter selects in, on the parameter's schema under a symbol (which neither
 * the validator nor the document writes): the OpenAPI document reads it to describe what the
 * operation answers with `fields` (fields-document.ts).
 */
export const SELECTS = Symbol('the record `fields` selects in');
export interface SelectedRecord {
  record: TSchema;
  /** The member always answered, when the record has one. */
  identifier: string | undefined;
}

/** The query parameter `fields`, documented with the names it takes. */
export function fieldsParameter(selectable: Selectable) {
  const identifier = identifierOf(selectable);
  const names = pathsOf(selectable.record as Shape, '');
  // The examples name the record's own fields: one inside a related record needs expand too.
  const own = names.filter(
    (name) => !(selectable.embedded ?? []).some((path) => name === path || name.startsWith(`${path}.`)),
  );
  const dotted = own.find((name) => name.includes('.'));
  const others = own.filter((name) => name !== identifier && !name.includes('.'));
  const embedded = selectable.embedded?.length ? selectable.embedded.join(', ') : undefined;
  const selected: SelectedRecord = { record: selectable.record, identifier };
  return Type.Optional(
    Type.String({
      [SELECTS]: selected,
      minLength: 1,
      examples: [others.slice(0, 2).join(','), ...(dotted ? [dotted] : [])],
      maxLength: FIELDS_LIMITS.length,
      description: `only these fields of each record, comma-separated: ${names.join(', ')}${dotted ? ` (a dotted name selects inside: ${dotted})` : ''}; ${identifier ? `${identifier} is always answered; ` : ''}${embedded ? `a name in ${embedded} (a related record) needs expand to name it, 400 otherwise; ` : ''}a name given twice counts once; at most ${FIELDS_LIMITS.names} names and ${FIELDS_LIMITS.length} characters; an unknown name is 400 (docs/reading.md)`,
    }),
  );
}

const kept = new WeakMap<TSchema, Map<string, FieldSelection>>();

/** The selection `fields` asks for (undefined without it); 400 invalid-query naming what is wrong. */
export function selectFields(selectable: Selectable, fields: unknown): FieldSelection | undefined {
  if (fields === undefined) return undefined;
  if (typeof fields !== 'string') throw refusal('must be one string of comma-separated names');
  let selections = kept.get(selectable.record);
  if (!selections) kept.set(selectable.record, (selections = new Map()));
  let selection = selections.get(fields);
  if (!selection) {
    selection = parseFields(selectable, fields);
    if (selections.size >= KEPT_PER_RECORD) selections.delete(selections.keys().next().value!);
    selections.set(fields, selection);
  }
  return selection;
}

/**
 * A selection is answered as it is: in JSON by JSON.stringify, since the route's compiled writer
 * requires every member the schema requires (what is picked holds only members of the schema, so
 * nothing else can be written); XML's writer writes the members present.
 */
export function answerSelected(request: FastifyRequest, reply: FastifyReply): void {
  if (request.format !== 'json') return;
  reply.type(`${MEDIA_TYPES.json.data}; charset=utf-8`).serializer((payload) => JSON.stringify(payload));
}

/** A record without an ETag: as it is, or only the fields asked for. */
export function sendFields(
  request: FastifyRequest,
  reply: FastifyReply,
  body: unknown,
  fields: FieldSelection | undefined,
) {
  if (!fields) return reply.send(body);
  answerSelected(request, reply);
  return reply.send(fields.pick(body));
}

function parseFields(selectable: Selectable, fields: string): FieldSelection {
  if (fields.length > FIELDS_LIMITS.length)
    throw refusal(`is ${fields.length} characters long; at most ${FIELDS_LIMITS.length}`);
  const names = fields.split(',');
  if (names.length > FIELDS_LIMITS.names)
    throw refusal(`names ${names.length} fields; at most ${FIELDS_LIMITS.names} may be asked for at once`);
  const record = selectable.record as Shape;
  const tree: Tree = new Map();
  const reaches: { path: string; name: string }[] = [];
  names.forEach((name, index) => {
    if (name === '')
      throw refusal(
        fields === ''
          ? 'is empty: name at least one field, or leave fields out for every field'
          : `has an empty name (name ${index + 1}); remove the extra comma`,
      );
    const segments = name.split('.');
    checkPath(record, segments, name);
    insert(tree, segments);
    for (const path of selectable.embedded ?? [])
      if ((name === path || name.startsWith(`${path}.`)) && !reaches.some((reached) => reached.path === path))
        reaches.push({ path, name });
  });
  const identifier = identifierOf(selectable);
  if (identifier) insert(tree, [identifier]);
  // A column is kept when its path, or a path it lies under, is selected; a JSON column (a
  // structure) also when something inside it is: its cell then holds what is picked of it.
  const selects = (column: CsvColumn) => {
    let node: Tree | true | undefined = tree;
    for (const segment of column.path) {
      node = node.get(segment);
      if (node === undefined || node === true) return node === true;
    }
    return true;
  };
  return { tag: digest(canonical(tree, record)), pick: picker(tree, record), selects, reaches };
}

/** The objects a schema may be: itself, its object branches (nullable, or one of several kinds), or those of an array's items. */
function objectShapes(schema: Shape): Shape[] {
  return (schema.anyOf ?? [schema]).flatMap((branch) =>
    branch.anyOf !== undefined
      ? objectShapes(branch)
      : branch.type === 'array'
        ? branch.items
          ? objectShapes(branch.items)
          : []
        : branch.type === 'object' && branch.properties
          ? [branch]
          : [],
  );
}

/**
 * The members of an object, or of the objects an array holds; undefined for anything else. Of a
 * union of objects (an operation: an import or a backup), the members of each: a name is taken
 * when one of them has it.
 */
function membersOf(schema: Shape): Record<string, Shape> | undefined {
  const shapes = objectShapes(schema);
  if (shapes.length <= 1) return shapes[0]?.properties;
  const members: Record<string, Shape> = {};
  for (const shape of shapes)
    for (const [name, member] of Object.entries(shape.properties!)) {
      const earlier = members[name];
      members[name] = earlier === undefined || earlier === member ? member : { anyOf: [earlier, member] };
    }
  return members;
}

function checkPath(record: Shape, segments: string[], name: string): void {
  let shape = record;
  segments.forEach((segment, depth) => {
    const holder = segments.slice(0, depth).join('.');
    const members = membersOf(shape);
    if (segment === '') throw refusal(`names ${quoted(name)}, which has an empty name between its dots`);
    if (!members || !Object.hasOwn(members, segment)) {
      const known = members ? Object.keys(members).join(', ') : undefined;
      throw refusal(
        depth === 0
          ? `names ${quoted(name)}, which is not a field; the fields are ${known}`
          : known === undefined
            ? `names ${quoted(name)}, but ${holder} has no fields inside it`
            : `names ${quoted(name)}, but ${holder} has no field ${quoted(segment)}; its fields are ${known}`,
      );
    }
    shape = members[segment]!;
  });
}

function insert(tree: Tree, segments: string[]): void {
  let node = tree;
  for (const [depth, segment] of segments.entries()) {
    const existing = node.get(segment);
    if (existing === true) return;
    if (depth === segments.length - 1) {
      node.set(segment, true);
      return;
    }
    const inner: Tree = existing ?? new Map();
    node.set(segment, inner);
    node = inner;
  }
}

/** The set in the schema's order, whatever the order and repetitions of the names asked for. */
function canonical(tree: Tree, schema: Shape): string {
  return Object.entries(membersOf(schema) ?? {})
    .filter(([name]) => tree.has(name))
    .map(([name, member]) => {
      const node = tree.get(name)!;
      return node === true ? name : `${name}(${canonical(node, member)})`;
    })
    .join(',');
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest().subarray(0, 9).toString('base64url');
}

function picker(tree: Tree, schema: Shape): (value: unknown) => unknown {
  // A union of objects: each record is picked by the branch that describes it, whole (kind says which).
  const branches = (schema.anyOf ?? []).filter((branch) => branch.type === 'object');
  if (branches.length > 1) {
    const pickers = new Map(branches.map((branch) => [branch, picker(tree, branch)]));
    return (value) => pickers.get(branchFor(branches, value) ?? branches[0]!)!(value);
  }
  const shape = structureOf(schema);
  if (shape.type === 'array') {
    const pick = picker(tree, shape.items ?? {});
    return (value) => (Array.isArray(value) ? value.map(pick) : (value ?? null));
  }
  const members = Object.entries(shape.properties ?? {})
    .filter(([name]) => tree.has(name))
    .map(([name, member]) => {
      const node = tree.get(name)!;
      return [name, node === true ? projector(member as TSchema) : picker(node, member)] as const;
    });
  return memberCopier(members);
}

function identifierOf(selectable: Selectable): string | undefined {
  const identifier = selectable.identifier ?? 'id';
  return Object.hasOwn(membersOf(selectable.record as Shape) ?? {}, identifier) ? identifier : undefined;
}

/** Every name `fields` takes: the members, and those inside objects and arrays of objects. */
function pathsOf(schema: Shape, prefix: string): string[] {
  return Object.entries(membersOf(schema) ?? {}).flatMap(([name, member]) => [
    `${prefix}${name}`,
    ...pathsOf(member, `${prefix}${name}.`),
  ]);
}

const quoted = (name: string) => JSON.stringify(name.length > 100 ? `${name.slice(0, 100)}…` : name);

function refusal(detail: string): BadRequestError {
  return new BadRequestError(
    `Query parameter fields ${detail}.`,
    [{ in: 'query', pointer: '#/fields', detail }],
    'invalid-query',
  );
}
