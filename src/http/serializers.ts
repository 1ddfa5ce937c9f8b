import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * Response serializers as Fastify builds them (fast-json-stringify), with two differences.
 *
 * Problems: Fastify compiles one serializer per response schema of every route when the app
 * starts, and every operation documents a dozen problem statuses (406, 413, 429, 500, 503…, one
 * schema): those were most of the start-up time (app.ready() took about a second), paid by every
 * process and worker. They are never used, since http/problem.ts writes every problem itself
 * (JSON or XML); so a problem status gets its serializer only if something ever asks for it, and
 * a success response on its first use (below).
 *
 * Success responses are written by shape only (see lenientSchema): what is stored is presented
 * as stored, and a value that breaks a rule of the schema (a timestamp written before a rule
 * existed, a word a vocabulary no longer has), or an answer that lacks a member added since (an
 * answer an earlier version of rowi stored for an Idempotency-Key, replayed after an upgrade),
 * can never turn a read, a replay, or a whole page, into a 500.
 */
export function serializerFactory(): SerializerFactory {
  const compilers = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = compilers(externalSchemas, options);
    return (route) => {
      if (Number(route.httpStatus) >= 400) return lazily(() => compile(route), false);
      return lazily(() => compile({ ...route, schema: lenientSchema(route.schema) }), true);
    };
  };
}

/**
 * Serializers compiled on their first use, like the validators (validation.ts): compiling every
 * success response of every route at start held about 10 MB of each process's memory for routes
 * it may never answer (docs/performance.md "Memory"). compileAllSerializers() compiles whatever is
 * still pending, so that a test makes a broken schema fail as it would have failed the start.
 */
const pending = new Set<() => unknown>();

function lazily(compile: () => (document: unknown) => string, checked: boolean): (document: unknown) => string {
  let serialize: ((document: unknown) => string) | undefined;
  const compileOnce = () => {
    pending.delete(compileOnce);
    return (serialize ??= compile());
  };
  // A problem's serializer (one shared schema, never used: see above) is not among those a test compiles.
  if (checked) pending.add(compileOnce);
  return (document) => (serialize ?? compileOnce())(document);
}

/** Compiles every success serializer not compiled yet; throws what fast-json-stringify throws for a broken schema. */
export function compileAllSerializers(): number {
  const compilers = [...pending];
  for (const compile of compilers) compile();
  return compilers.length;
}

/** Rules of a value, as opposed to its shape: they validate input, and mean nothing to a writer. */
const VALUE_RULES = new Set([
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'enum',
  'minItems',
  'maxItems',
  'uniqueItems',
]);

/**
 * A copy of a response schema that keeps its shape (types, members, items, which members are
 * written) and drops the rules of values. fast-json-stringify chooses the branch of an `anyOf`
 * (a nullable field, a choice of words) by validating the value against each branch, rules
 * included, and throws when none fits; it writes a `const` as the constant whatever the value
 * is; and it throws on a `required` member the value lacks. Here a choice of constants becomes
 * their type, a branch fits any value of its type, and a member that is absent is left out: only
 * the objects of an `anyOf` of several kinds of object keep their own `required`, by which the
 * kind is chosen (an import or a backup). The
 * original schema, which validates and documents, is left as it is.
 */
export function lenientSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(lenientSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const source = schema as Record<string, unknown>;
  if (source.const !== undefined) return { type: typeof source.const === 'number' ? 'number' : typeof source.const };
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (VALUE_RULES.has(key) || key === 'required') continue;
    if (key === 'properties' && typeof value === 'object' && value !== null) {
      copy[key] = Object.fromEntries(Object.entries(value).map(([name, member]) => [name, lenientSchema(member)]));
    } else if (key === 'anyOf' && Array.isArray(value)) {
      // Objects of several kinds are told apart by their members; one object (or null) by its type.
      const kinds = value.filter((branch) => (branch as { type?: unknown } | null)?.type === 'object').length;
      copy[key] = distinct(
        value.map((branch) =>
          openBranch(kinds > 1 ? withOwnRequired(lenientSchema(branch), branch) : lenientSchema(branch)),
        ),
      );
    } else if (key === 'items' || key === 'additionalProperties') {
      copy[key] = lenientSchema(value);
    } else {
      copy[key] = value;
    }
  }
  return copy;
}

/**
 * A branch of an `anyOf` chosen by its members, not by what else the value carries: an object
 * presented with a member its schema does not write (an operation's `version`, used for its
 * ETag) still fits the branch whose required members it has (the kinds of operation differ there).
 */
function openBranch(branch: unknown): unknown {
  if (
    typeof branch !== 'object' ||
    branch === null ||
    (branch as { additionalProperties?: unknown }).additionalProperties !== false
  )
    return branch;
  const { additionalProperties: _closed, ...open } = branch as Record<string, unknown>;
  return open;
}

/** A branch with the `required` of its original, by which fast-json-stringify tells the branches apart. */
function withOwnRequired(lenient: unknown, original: unknown): unknown {
  const required = (original as { required?: unknown } | null)?.required;
  if (typeof lenient !== 'object' || lenient === null || required === undefined) return lenient;
  return { ...lenient, required };
}

/** Branches that became equal (three constants, one type) are one branch. */
function distinct(branches: unknown[]): unknown[] {
  const seen = new Set<string>();
  return branches.filter((branch) => {
    const key = JSON.stringify(branch);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
