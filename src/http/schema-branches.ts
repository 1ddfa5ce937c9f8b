/**
 * Which branch of a union (`anyOf`) describes a value, for the writers that follow a schema (XML,
 * `fields`). A nullable member has one branch per kind of value, found by the value's kind. A
 * union of several objects (an operation: an import or a backup) is decided by what the value
 * holds: no branch whose const members it contradicts (`kind: "backup"` is no import), and of the
 * others the one that declares the most of its members, nested members likewise; a value with only
 * some of its members (what `fields` keeps) fits the first branch that has them.
 */
export interface Branching {
  type?: string | string[];
  const?: unknown;
  properties?: Record<string, Branching>;
  additionalProperties?: boolean | Branching;
  items?: Branching;
  anyOf?: Branching[];
}

type Kind = 'array' | 'null' | 'object' | 'string' | 'number' | 'boolean' | 'other';

function kindOf(value: unknown): Kind {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  const type = typeof value;
  return type === 'object' || type === 'string' || type === 'number' || type === 'boolean' ? type : 'other';
}

function ofKind(schema: Branching, kind: Kind): boolean {
  const types = [schema.type ?? []].flat();
  return types.includes(kind) || (kind === 'number' && types.includes('integer'));
}

/** The branch of `branches` that describes `value`; undefined when none is of its kind. */
export function branchFor<S extends Branching>(branches: readonly S[], value: unknown): S | undefined {
  const kind = kindOf(value);
  const candidates = branches.filter((branch) => ofKind(branch, kind));
  if (candidates.length <= 1) return candidates[0];
  let best = candidates[0];
  let fewest = Infinity;
  for (const branch of candidates) {
    const misfits = misfitsOf(branch, value);
    if (misfits < fewest) [best, fewest] = [branch, misfits];
  }
  return best;
}

/**
 * How badly a value fits a schema: Infinity when a kind or a const differs (`kind: "backup"` is no
 * import), else the number of members it has that the schema does not declare (a record as stored
 * may hold more than it answers), nested members counted likewise.
 */
function misfitsOf(schema: Branching, value: unknown): number {
  if (schema.anyOf !== undefined) return Math.min(...schema.anyOf.map((branch) => misfitsOf(branch, value)));
  if ('const' in schema) return value === schema.const ? 0 : Infinity;
  const kind = kindOf(value);
  if (schema.type !== undefined && !ofKind(schema, kind)) return Infinity;
  if (kind === 'array')
    return schema.items === undefined
      ? 0
      : (value as unknown[]).reduce<number>((sum, item) => sum + misfitsOf(schema.items!, item), 0);
  if (kind !== 'object') return 0;
  let misfits = 0;
  for (const [name, member] of Object.entries(value as Record<string, unknown>)) {
    if (member === undefined) continue;
    const declared = schema.properties?.[name];
    if (declared !== undefined) misfits += misfitsOf(declared, member);
    else if (schema.additionalProperties === false) misfits++;
  }
  return misfits;
}
