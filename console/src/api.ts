/**
 * The console's one way to rowi: the public API, over fetch, with the credential the operator
 * signed in with. The credential lives in this module's memory only (never a cookie, never
 * storage): closing or reloading the tab, or signing out, forgets it.
 */

/** An RFC 9457 problem as rowi answers it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  errors?: { in?: string; pointer?: string; detail: string }[];
  [extension: string]: unknown;
}

/** A refusal or failure of a call: the problem rowi answered, or one made for a network failure. */
export class ApiError extends Error {
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(problem.detail ?? problem.title);
    this.problem = problem;
  }
  get status(): number {
    return this.problem.status;
  }
  /** The problem type's last segment: `precondition-failed`. */
  get kind(): string {
    return this.problem.type.slice(this.problem.type.lastIndexOf('/') + 1);
  }
}

export type Credential = { kind: 'key'; key: string } | { kind: 'token'; token: string; expiresAt: number };

let credential: Credential | undefined;

export function setCredential(next: Credential | undefined): void {
  credential = next;
}

export function credentialHeaders(): Record<string, string> {
  if (credential === undefined) return {};
  return credential.kind === 'key' ? { 'x-api-key': credential.key } : { authorization: `Bearer ${credential.token}` };
}

/** A page of a collection. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
  etag: string | null;
}

export interface CallOptions {
  method?: string;
  query?: Record<string, string | number | boolean | undefined | null>;
  /** A JSON body, or raw bytes with their media type. */
  body?: unknown;
  raw?: { data: Blob | string; type: string };
  headers?: Record<string, string>;
  ifMatch?: string | null;
  signal?: AbortSignal;
}

/** The path with its query; parameters without a value are left out. */
export function withQuery(path: string, query: CallOptions['query']): string {
  if (query === undefined) return path;
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === '') continue;
    search.set(name, String(value));
  }
  const text = search.toString();
  return text === '' ? path : `${path}${path.includes('?') ? '&' : '?'}${text}`;
}

/** Listeners told when a call answers 401: the credential is no longer good. */
const unauthorised = new Set<() => void>();
export function onUnauthorised(listener: () => void): () => void {
  unauthorised.add(listener);
  return () => unauthorised.delete(listener);
}

async function problemOf(response: Response): Promise<Problem> {
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    try {
      const body = (await response.json()) as Partial<Problem>;
      if (typeof body.title === 'string')
        return { ...body, type: body.type ?? 'about:blank', title: body.title, status: body.status ?? response.status };
    } catch {
      // Not JSON after all: described below.
    }
  }
  return { type: 'about:blank', title: response.statusText || `HTTP ${response.status}`, status: response.status };
}

/** Calls rowi; resolves with the answer of a 2xx or 304, throws ApiError otherwise. */
export async function call<T = unknown>(path: string, options: CallOptions = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json', ...credentialHeaders(), ...options.headers };
  let body: BodyInit | undefined;
  if (options.raw !== undefined) {
    headers['content-type'] = options.raw.type;
    body = options.raw.data;
  } else if (options.body !== undefined) {
    headers['content-type'] = options.method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    body = JSON.stringify(options.body);
  }
  if (options.ifMatch) headers['if-match'] = options.ifMatch;
  let response: Response;
  try {
    response = await fetch(withQuery(path, options.query), {
      method: options.method ?? 'GET',
      headers,
      body,
      signal: options.signal,
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError({
      type: 'about:blank',
      title: 'rowi did not answer',
      status: 0,
      detail: 'The request did not reach rowi or its answer was lost: is rowi running, and is this its address?',
    });
  }
  if (!response.ok && response.status !== 304) {
    const problem = await problemOf(response);
    if (response.status === 401) for (const listener of unauthorised) listener();
    throw new ApiError(problem);
  }
  const type = response.headers.get('content-type') ?? '';
  const parsed =
    response.status === 204 || response.status === 304
      ? undefined
      : type.includes('json')
        ? await response.json()
        : await response.text();
  return { status: response.status, body: parsed as T, headers: response.headers, etag: response.headers.get('etag') };
}

export const get = <T>(path: string, query?: CallOptions['query'], signal?: AbortSignal) =>
  call<T>(path, { query, signal }).then((answer) => answer.body);

/** Exchanges a client id (the caller's name) and secret (one of its keys) for a token (POST /oauth/token). */
export async function exchangeForToken(clientId: string, secret: string): Promise<Credential> {
  let response: Response;
  try {
    response = await fetch('/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError({ type: 'about:blank', title: 'rowi did not answer', status: 0 });
  }
  const body = (await response.json().catch(() => ({}))) as {
    access_token?: string;
    expires_in?: number;
    error?: string;
    error_description?: string;
  };
  if (!response.ok || typeof body.access_token !== 'string') {
    throw new ApiError({
      type: 'about:blank',
      title: body.error === 'invalid_client' ? 'The client id or secret is wrong' : 'No token was issued',
      status: response.status,
      detail: body.error_description ?? body.error,
    });
  }
  return { kind: 'token', token: body.access_token, expiresAt: Date.now() + (body.expires_in ?? 0) * 1000 };
}

/** Downloads an answer as a file named `name` (an export, say), through a link to the bytes in memory. */
export async function download(
  path: string,
  accept: string,
  name: string,
  query?: CallOptions['query'],
): Promise<number> {
  const response = await fetch(withQuery(path, query), {
    headers: { accept, ...credentialHeaders() },
    credentials: 'omit',
    cache: 'no-store',
  }).catch(() => undefined);
  if (response === undefined) throw new ApiError({ type: 'about:blank', title: 'rowi did not answer', status: 0 });
  if (!response.ok) throw new ApiError(await problemOf(response));
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return blob.size;
}
