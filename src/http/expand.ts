import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import Type, { type TSchema } from 'typebox';
import { BadRequestError } from '../errors.js';
import { entityTag } from './etag.js';
import type { Shape } from './export-shapes.js';
import type { Format } from './negotiate.js';

/**
 * `expand=` (docs/reading.md "Related records in one call"): the parsing and checking of the paths
 * a caller asks to embed, the same for every resource that offers it. A resource declares the
 * relations between resources as a graph (a member path of one resource → the resource it names);
 * what may be expanded from a root is every walk of that graph at most MAX_EXPAND_DEPTH relations
 * long that visits no resource twice. Depth counts the records embedded along a path, not its dots:
 * an order's `lines` are the order's own, so `lines.item` is one level and `lines.item.stock` two.
 * A path also expands the records on its way (`lines.item.stock` expands `lines.item`).
 */
export const MAX_EXPAND_DEPTH = 2;
/** How many paths one request may name, and how long one and all of them may be. */
export const MAX_EXPAND_PATHS = 10;
export const MAX_EXPAND_PATH_LENGTH = 64;
const MAX_EXPAND_TEXT = MAX_EXPAND_PATHS * (MAX_EXPAND_PATH_LENGTH + 1);

/** By resource, its relations: a member path (`user`, `lines.item`) → the resource it names. */
export type RelationGraph = Readonly<Record<string, Readonly<Record<string, string>>>>;

export interface Expandable {
  /** The resource whose records are expanded (`orders`). */
  root: string;
  relations: RelationGraph;
}

/** A path asked for, and the resources it embeds, in order (`lines.item.stock` → items, stock). */
export interface ExpandPath {
  path: string;
  resources: string[];
}

/** Every path the root may expand, shortest first. */
export function expandablePaths(spec: Expandable): string[] {
  const paths: string[] = [];
  const walk = (resource: string, prefix: string, seen: string[]) => {
    // seen holds the root and the resources embedded so far: its length less one is the depth.
    if (seen.length > MAX_EXPAND_DEPTH) return;
    for (const [member, target] of Object.entries(spec.relations[resource] ?? {})) {
      if (seen.includes(target)) continue;
      const path = `${prefix}${member}`;
      paths.push(path);
      walk(target, `${path}.`, [...seen, target]);
    }
  };
  walk(spec.root, '', [spec.root]);
  return paths.sort((a, b) => a.split('.').length - b.split('.').length || a.localeCompare(b));
}

/** The schema of the `expand` query parameter: the paths the root offers (an enum), each at most once. */
export function expandParameter(spec: Expandable) {
  const paths = expandablePaths(spec);
  return Type.Array(Type.Enum(paths), {
    uniqueItems: true,
    maxItems: Math.min(paths.length, MAX_EXPAND_PATHS),
    description: `related records to embed, comma-separated or repeated: ${paths.join(', ')}; at most ${MAX_EXPAND_DEPTH} levels (docs/reading.md "Related records in one call"). Each needs the read scope of what it embeds (403 otherwise); a record the caller may not see is embedded as null.`,
  });
}

/**
 * The paths of an `expand` parameter, checked: 400 invalid-query naming the path for a path too
 * long, empty, unknown, around a cycle or deeper than MAX_EXPAND_DEPTH, for one named twice, and
 * for more than MAX_EXPAND_PATHS of them.
 */
export function parseExpand(spec: Expandable, value: string | string[]): ExpandPath[] {
  const texts = Array.isArray(value) ? value : [value];
  const length = texts.reduce((sum, text) => sum + text.length + 1, 0);
  if (length > MAX_EXPAND_TEXT)
    throw badExpand(`is ${length} characters long; at most ${MAX_EXPAND_TEXT} (${MAX_EXPAND_PATHS} paths) are taken`);
  const named = texts.flatMap((text) => text.split(','));
  if (named.length > MAX_EXPAND_PATHS)
    throw badExpand(`names ${named.length} paths; at most ${MAX_EXPAND_PATHS} may be expanded at once`);
  const parsed: ExpandPath[] = [];
  for (const path of named) {
    const found = resolve(spec, path);
    if (parsed.some((earlier) => earlier.path === path)) throw badExpand(`names ${path} twice`);
    parsed.push(found);
  }
  return parsed;
}

function resolve(spec: Expandable, path: string): ExpandPath {
  if (path.length > MAX_EXPAND_PATH_LENGTH)
    throw badExpand(`names a path of ${path.length} characters; a path has at most ${MAX_EXPAND_PATH_LENGTH}`);
  const segments = path.split('.');
  if (segments.some((segment) => segment === '')) throw badExpand(`names an empty path or segment ("${path}")`);
  const offered = () => `${spec.root} can expand ${expandablePaths(spec).join(', ')}`;
  const seen = [spec.root];
  let at = 0;
  while (at < segments.length) {
    const resource = seen[seen.length - 1]!;
    const relations = Object.entries(spec.relations[resource] ?? {});
    const match = relations.find(([member]) => segments.slice(at, at + member.split('.').length).join('.') === member);
    if (!match) throw badExpand(`names ${path}, which is no related record: ${offered()}`);
    const [member, target] = match;
    if (seen.includes(target))
      throw badExpand(`names ${path}, which goes around a cycle (${[...seen, target].join(' → ')})`);
    seen.push(target);
    at += member.split('.').length;
  }
  if (seen.length - 1 > MAX_EXPAND_DEPTH)
    throw badExpand(`names ${path}, ${seen.length - 1} levels deep; at most ${MAX_EXPAND_DEPTH} (${offered()})`);
  return { path, resources: seen.slice(1) };
}

function badExpand(detail: string): BadRequestError {
  return new BadRequestError(
    `Query parameter expand ${detail}.`,
    [{ in: 'query', pointer: '#/expand', detail }],
    'invalid-query',
  );
}

/**
 * A preValidation hook that turns the `expand` text of the query (comma-separated, repeated or both)
 * into the checked paths, so that the route's schema (an array of the paths offered) validates them
 * and the handler reads them as a list.
 */
export function expandHook(spec: Expandable) {
  return async (request: FastifyRequest) => {
    const query = request.query as { expand?: string | string[] };
    if (query.expand !== undefined) query.expand = parseExpand(spec, query.expand).map((path) => path.path);
  };
}

/** The paths a request's validated query names, or undefined when it names none. */
export function expandOf(request: FastifyRequest): string[] | undefined {
  const paths = (request.query as { expand?: string[] } | undefined)?.expand;
  return paths !== undefined && paths.length > 0 ? paths : undefined;
}

/** The paths of `paths` that start with `prefix.`, without it (`order.user` → `user`). */
export function pathsUnder(paths: readonly string[], prefix: string): string[] {
  return paths.filter((path) => path.startsWith(`${prefix}.`)).map((path) => path.slice(prefix.length + 1));
}

/** Whether `paths` expand `path`, itself or by a longer path through it. */
export function expands(paths: readonly string[], path: string): boolean {
  return paths.some((named) => named === path || named.startsWith(`${path}.`));
}

/**
 * The schema of a record as answered with `paths` expanded: the expanded record's schema (every
 * member expand may add) without the members of the relations `paths` do not expand. An export's
 * columns and lines follow it, so that a CSV has the columns of what it embeds only.
 */
export function expandedSchema(record: TSchema, spec: Expandable, paths: readonly string[]): TSchema {
  let byPaths = schemasOf.get(record);
  if (!byPaths) schemasOf.set(record, (byPaths = new Map()));
  const key = [...paths].sort().join(',');
  let schema = byPaths.get(key);
  if (!schema) {
    const left = expandablePaths(spec).filter((path) => !expands(paths, path));
    schema = withoutMembers(
      record as Shape,
      left.map((path) => path.split('.')),
    ) as TSchema;
    byPaths.set(key, schema);
  }
  return schema;
}
// By record schema, by the paths expanded (sorted): at most the subsets of a root's few paths.
const schemasOf = new WeakMap<TSchema, Map<string, TSchema>>();

/** A copy of `schema` without the members at `removed` (paths through objects, arrays and nullable members). */
function withoutMembers(schema: Shape, removed: readonly string[][]): Shape {
  if (removed.length === 0) return schema;
  if (schema.anyOf) return { ...schema, anyOf: schema.anyOf.map((choice) => withoutMembers(choice, removed)) };
  if (schema.type === 'array' && schema.items) return { ...schema, items: withoutMembers(schema.items, removed) };
  if (!schema.properties) return schema;
  const properties = Object.entries(schema.properties)
    .filter(([name]) => !removed.some((path) => path.length === 1 && path[0] === name))
    .map(([name, member]) => {
      const inside = removed.filter((path) => path.length > 1 && path[0] === name).map((path) => path.slice(1));
      return [name, withoutMembers(member, inside)] as const;
    });
  return { ...schema, properties: Object.fromEntries(properties) };
}

/**
 * The entity tag of a record with expansions: another representation than the plain one (RFC 9110
 * §8.8.3), so never the plain tag. It names the record's version, the paths and the versions of
 * every record embedded (and the field set, with fields), and is weak: it stands for the content, not for the stored record, so
 * If-Match never accepts it.
 */
export function expandedTag(
  version: number,
  paths: readonly string[],
  embedded: string,
  format: Format,
  fieldsTag?: string,
): string {
  // With fields, the field set is part of the representation too (docs/reading.md "Only the fields asked for").
  const digest = createHash('sha256')
    .update(`${[...paths].sort().join(',')}|${embedded}${fieldsTag === undefined ? '' : `|f${fieldsTag}`}`)
    .digest()
    .subarray(0, 9)
    .toString('base64url');
  return entityTag(`v${version}-x${digest}`, format, true);
}
