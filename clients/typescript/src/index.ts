import createClient, { type Client } from 'openapi-fetch';
import type { RowiClientOptions } from './client-options.js';
import type { paths } from './schema.js';

export type { components, operations, paths } from './schema.js';
export type * from './types.js';
export type { RowiClientOptions } from './client-options.js';

/** The media types the client asks for and reads: JSON, and problems as JSON (RFC 9457). */
type Json = 'application/json' | 'application/problem+json';

/** A rowi client: `GET`, `POST`, `PUT`, `PATCH`, `DELETE` of openapi-fetch, typed by rowi's paths. */
export type RowiClient = Client<paths, Json>;

/**
 * A typed client for rowi: every path, parameter, body and answer is typed from rowi's OpenAPI
 * document; an answer's `data` is typed by its 2xx schema, and its `error` is the problem
 * (`Problem`: type, title, status, detail, errors…).
 *
 * ```ts
 * const rowi = createRowiClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.ROWI_KEY });
 * const { data, error } = await rowi.POST('/v1/users', { body: { name: 'Ada', email: 'ada@example.com' } });
 * ```
 */
export function createRowiClient(options: RowiClientOptions): RowiClient {
  if ((options.apiKey === undefined) === (options.token === undefined))
    throw new TypeError('createRowiClient: give either an apiKey or a token');
  const credentials: Record<string, string> =
    options.apiKey !== undefined ? { 'X-API-Key': options.apiKey } : { Authorization: `Bearer ${options.token}` };
  return createClient<paths, Json>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { Accept: 'application/json', ...options.headers, ...credentials },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
}

export { importFile, RowiProblemError, type ImportFileOptions } from './imports.js';
