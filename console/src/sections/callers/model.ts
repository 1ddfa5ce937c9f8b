/** What a caller is (the Caller and ApiKey schemas), and what the API description says it may be. */
import { get } from '../../api.js';

export type Access = 'all' | 'own';

/** A caller as rowi shows it (the Caller schema). */
export interface Caller {
  id: number;
  name: string;
  role: string;
  extra_scopes: string[];
  removed_scopes: string[];
  scopes: string[];
  record_access: Record<string, Access>;
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
}

/** An API key's record (the ApiKey schema): never the key itself. */
export interface ApiKey {
  id: number;
  caller_id: number;
  prefix: string;
  description: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** The answer to issuing a key: the one time the key is shown. */
export interface NewApiKey extends ApiKey {
  key: string;
}

// ---------------------------------------------------------------------------------------------
// What the API says a caller may be: its roles, scopes and owned resources, from the public
// OpenAPI document (the Caller schemas' enumerations), read once per page load.

export interface Catalogue {
  roles: { name: string; hint: string }[];
  scopes: string[];
  /** Resources whose records have an owner: record access is all or own for each. */
  owned: string[];
}

type Schema = {
  $ref?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  description?: string;
};

let catalogue: Promise<Catalogue> | undefined;

export function loadCatalogue(): Promise<Catalogue> {
  catalogue ??= get<{ components?: { schemas?: Record<string, Schema> } }>('/v1/openapi.json').then((document) => {
    const schemas = document.components?.schemas ?? {};
    const resolve = (schema: Schema | undefined): Schema | undefined => {
      let current = schema;
      for (let depth = 0; current?.$ref !== undefined && depth < 10; depth += 1)
        current = schemas[current.$ref.slice(current.$ref.lastIndexOf('/') + 1)];
      return current;
    };
    const literals = (schema: Schema | undefined): string[] => {
      const resolved = resolve(schema);
      if (resolved === undefined) return [];
      if (resolved.enum) return resolved.enum.map(String);
      if (resolved.const !== undefined) return [String(resolved.const)];
      return [...(resolved.anyOf ?? []), ...(resolved.oneOf ?? [])].flatMap(literals);
    };
    const caller = resolve(schemas.Caller)?.properties ?? {};
    const role = resolve(caller.role);
    const roleNames = literals(role);
    const scopes = literals(resolve(caller.extra_scopes)?.items);
    const owned = Object.keys(resolve(caller.record_access)?.properties ?? {});
    if (roleNames.length === 0 || scopes.length === 0)
      throw new Error('The API description names no roles or scopes for callers.');
    return {
      roles: roleNames.map((name) => ({ name, hint: roleHint(role?.description ?? '', name, roleNames) })),
      scopes,
      owned,
      extraHint: resolve(caller.extra_scopes)?.description ?? '',
    };
  });
  catalogue.catch(() => (catalogue = undefined));
  return catalogue;
}

/** The part of the role's description about `name` ("reader: read everything; editor: …"). */
function roleHint(description: string, name: string, names: string[]): string {
  const start = description.indexOf(`${name}: `);
  if (start < 0) return '';
  const rest = description.slice(start + name.length + 2);
  const ends = names
    .map((other) => rest.indexOf(`; ${other}: `))
    .filter((index) => index >= 0)
    .sort((a, b) => a - b);
  return rest.slice(0, ends[0] ?? rest.length);
}

/** Caller management (callers:*) comes only with the admin role: it cannot be an extra scope. */
export const grantable = (scope: string) => !scope.startsWith('callers:');

/** Scopes grouped by their resource, in the document's order. */
export function byResource(scopes: string[]): [string, string[]][] {
  const groups = new Map<string, string[]>();
  for (const scope of scopes) {
    const resource = scope.slice(0, scope.indexOf(':'));
    groups.set(resource, [...(groups.get(resource) ?? []), scope]);
  }
  return [...groups];
}

export function accessSummary(access: Record<string, Access>): string {
  const own = Object.entries(access)
    .filter(([, value]) => value === 'own')
    .map(([resource]) => resource);
  if (own.length === 0) return 'all records';
  return `its own ${own.join(', ')}; all else`;
}
