/**
 * The OpenAPI document with every local $ref (#/components/…) replaced by what it names, for tests
 * that read an operation's schemas and responses as a generator would after resolving them.
 * A schema that refers to itself would recurse forever; rowi has none, and this would throw.
 */
export function dereferenced<T>(document: T): T {
  const root = document as unknown;
  const resolve = (value: unknown, depth: number): unknown => {
    if (depth > 64) throw new Error('the document refers to itself');
    if (Array.isArray(value)) return value.map((each) => resolve(each, depth + 1));
    if (typeof value !== 'object' || value === null) return value;
    const ref = (value as { $ref?: unknown }).$ref;
    if (typeof ref === 'string' && ref.startsWith('#/')) {
      const target = ref
        .slice(2)
        .split('/')
        .reduce<unknown>(
          (node, key) => (node as Record<string, unknown>)[key.replace(/~1/g, '/').replace(/~0/g, '~')],
          root,
        );
      if (target === undefined) throw new Error(`${ref} names nothing in the document`);
      return resolve(target, depth + 1);
    }
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, resolve(member, depth + 1)]));
  };
  return resolve(document, 0) as T;
}

/** One operation of the document: its method (upper case), its path template, and its description. */
export interface DocumentedOperation {
  method: string;
  path: string;
  operation: {
    parameters?: { name: string; in: string; required?: boolean; schema?: { type?: string } }[];
    responses: Record<string, unknown>;
  };
}

/** Every operation of the document, path by path. */
export function documentedOperations(document: unknown): DocumentedOperation[] {
  const paths = (document as { paths: Record<string, Record<string, DocumentedOperation['operation']>> }).paths;
  return Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
  );
}

/** A path template with each parameter given a value (`/v1/users/{id}` → `/v1/users/1`). */
export function concretePath(path: string, value = '1'): string {
  return path.replace(/\{[^}]+\}/g, value);
}
