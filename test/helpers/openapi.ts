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
