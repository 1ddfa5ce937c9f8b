import { dereferenced } from './openapi.js';

/**
 * The changes between two versions of the OpenAPI document that break a client written against
 * the older one (docs/compatibility.md): a removed path or operation, a removed response field or
 * enum value, a new required input (parameter, body or body field), a narrowed type (a type that
 * changed, a tighter bound on an input). Additions break nothing and are not listed.
 */
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'];

export function breakingChanges(before: unknown, after: unknown): string[] {
  const old = dereferenced(before) as Json;
  const now = dereferenced(after) as Json;
  const found: string[] = [];
  for (const [path, oldItem] of Object.entries<Json>(old.paths ?? {})) {
    const newItem = now.paths?.[path] as Json | undefined;
    if (newItem === undefined) {
      found.push(`${path}: path removed`);
      continue;
    }
    for (const method of METHODS.filter((each) => oldItem[each] !== undefined)) {
      const where = `${method.toUpperCase()} ${path}`;
      if (newItem[method] === undefined) found.push(`${where}: operation removed`);
      else compareOperation(where, oldItem[method] as Json, newItem[method] as Json, found);
    }
  }
  return found;
}

function compareOperation(where: string, old: Json, now: Json, found: string[]): void {
  const key = (parameter: Json) => `${parameter.in} ${parameter.name}`;
  const oldParameters = new Map<string, Json>(
    (old.parameters ?? []).map((parameter: Json) => [key(parameter), parameter]),
  );
  for (const parameter of (now.parameters ?? []) as Json[]) {
    const before = oldParameters.get(key(parameter));
    if (parameter.required === true && before?.required !== true)
      found.push(`${where}: new required parameter ${key(parameter)}`);
    if (before !== undefined)
      compareSchema(`${where} parameter ${key(parameter)}`, before.schema, parameter.schema, 'input', found);
  }
  if (now.requestBody?.required === true && old.requestBody?.required !== true)
    found.push(`${where}: request body now required`);
  for (const [media, content] of Object.entries<Json>(old.requestBody?.content ?? {})) {
    const after = now.requestBody?.content?.[media];
    if (after === undefined) found.push(`${where}: request body ${media} no longer accepted`);
    else compareSchema(`${where} body`, content.schema, after.schema, 'input', found);
  }
  for (const [status, response] of Object.entries<Json>(old.responses ?? {})) {
    if (Number(status) >= 400) continue;
    for (const [media, content] of Object.entries<Json>(response.content ?? {})) {
      const after = now.responses?.[status]?.content?.[media];
      if (after === undefined) found.push(`${where} ${status}: ${media} answer removed`);
      else compareSchema(`${where} ${status}`, content.schema, after.schema, 'output', found);
    }
  }
}

/** The values a schema allows when it lists them: enum, const, or alternatives that each do (TypeBox writes a union of literals so). */
function valuesOf(schema: Json): unknown[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum as unknown[];
  if ('const' in schema) return [schema.const];
  const alternatives = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  const lists = alternatives?.map(valuesOf);
  return lists !== undefined && lists.every((list) => list !== undefined) ? lists.flat() : undefined;
}

const typesOf = (schema: Json): string[] => [schema.type ?? []].flat().sort();

function compareSchema(
  where: string,
  old: Json | undefined,
  now: Json | undefined,
  direction: 'input' | 'output',
  found: string[],
): void {
  if (old === undefined || now === undefined) return;
  const oldTypes = typesOf(old);
  const newTypes = typesOf(now);
  if (oldTypes.length > 0 && newTypes.length > 0) {
    // An input may take more types than before; an output may not answer a type it did not.
    const lost =
      direction === 'input'
        ? oldTypes.filter((type) => !newTypes.includes(type))
        : newTypes.filter((type) => !oldTypes.includes(type));
    if (lost.length > 0)
      found.push(`${where}: type narrowed or changed (${oldTypes.join('|')} → ${newTypes.join('|')})`);
  }
  const oldValues = valuesOf(old);
  const newValues = valuesOf(now);
  if (oldValues !== undefined && newValues !== undefined) {
    for (const value of oldValues)
      if (!newValues.includes(value)) found.push(`${where}: enum value ${JSON.stringify(value)} removed`);
  }
  if (direction === 'input') {
    for (const name of (now.required ?? []) as string[])
      if (!(old.required ?? []).includes(name)) found.push(`${where}: new required field ${name}`);
    for (const bound of ['maxLength', 'maximum', 'maxItems']) {
      if (typeof now[bound] === 'number' && !(typeof old[bound] === 'number' && old[bound] <= now[bound]))
        found.push(`${where}: ${bound} narrowed (${old[bound] ?? 'none'} → ${now[bound]})`);
    }
    for (const bound of ['minLength', 'minimum', 'minItems']) {
      if (typeof now[bound] === 'number' && !(typeof old[bound] === 'number' && old[bound] >= now[bound]))
        found.push(`${where}: ${bound} narrowed (${old[bound] ?? 'none'} → ${now[bound]})`);
    }
    if (now.pattern !== undefined && now.pattern !== old.pattern)
      found.push(`${where}: ${old.pattern === undefined ? 'new pattern' : 'pattern changed'}`);
  } else {
    for (const name of Object.keys(old.properties ?? {}))
      if (now.properties?.[name] === undefined) found.push(`${where}: response field ${name} removed`);
  }
  for (const [name, property] of Object.entries<Json>(old.properties ?? {}))
    compareSchema(`${where}.${name}`, property, now.properties?.[name], direction, found);
  compareSchema(`${where}[]`, old.items, now.items, direction, found);
  if (oldValues !== undefined) return;
  for (const list of ['anyOf', 'oneOf'] as const) {
    (old[list] as Json[] | undefined)?.forEach((each, index) =>
      compareSchema(`${where}(${list} ${index})`, each, now[list]?.[index], direction, found),
    );
  }
}
