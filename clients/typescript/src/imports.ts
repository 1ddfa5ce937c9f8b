import type { ImportOperation, Problem } from './types.js';
import type { RowiClientOptions } from './client-options.js';

/** The collections a file can be imported into, and where. */
const IMPORT_PATHS = {
  users: '/v1/users/import',
  items: '/v1/items/import',
  stock: '/v1/items/stock/import',
  orders: '/v1/orders/import',
} as const;

/**
 * What the file holds: users, items (a catalogue, by sku), stock levels, or orders (CSV: a row per
 * line, grouped by an `order` column; NDJSON: the body of POST /v1/orders a line). Orders have no
 * natural key, so no onConflict.
 */
export type ImportFileOptions = ImportOptions &
  (
    | { collection: 'users' | 'items' | 'stock'; onConflict?: 'error' | 'skip' | 'update' }
    | { collection: 'orders'; onConflict?: never }
  );

interface ImportOptions {
  /** The file: a Blob (a File in a browser), bytes, text, or a stream (Node: Readable.toWeb(createReadStream(path))). */
  file: Blob | Uint8Array | string | ReadableStream<Uint8Array>;
  mediaType: 'text/csv' | 'application/x-ndjson';
  mode?: 'atomic' | 'partial';
  dryRun?: boolean;
  /**
   * Makes the upload safe to retry: sent again with the same key, file and options (within 24
   * hours), rowi answers the operation the first upload started instead of importing the file twice.
   */
  idempotencyKey?: string;
  /** Milliseconds between two reads of the operation when rowi sends no Retry-After (default 1,000). */
  pollMs?: number;
  /** Gives up waiting (the import goes on) after this many milliseconds (default 1 hour). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** An import refused before it started (413, 415, 422 …) or an operation that could not be read: its problem. */
export class RowiProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(`${problem.status} ${problem.title}: ${problem.detail ?? ''}`);
  }
}

/**
 * Uploads a file to `POST /v1/<collection>/import` and waits for its operation to end
 * (docs/bulk.md "Imports"), reading it as often as its Retry-After says. Resolves with the ended
 * operation (succeeded, failed or cancelled: see its `summary` and `errors`); rejects with
 * RowiProblemError when the file is refused at once.
 *
 * ```ts
 * const done = await importFile(
 *   { baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.ROWI_KEY },
 *   { collection: 'items', file: await readFile('catalogue.csv'), mediaType: 'text/csv', mode: 'partial' },
 * );
 * ```
 */
export async function importFile(client: RowiClientOptions, options: ImportFileOptions): Promise<ImportOperation> {
  const fetch = client.fetch ?? globalThis.fetch;
  const baseUrl = client.baseUrl.replace(/\/+$/, '');
  const credentials: Record<string, string> =
    client.apiKey !== undefined ? { 'X-API-Key': client.apiKey } : { Authorization: `Bearer ${client.token ?? ''}` };
  const headers = { Accept: 'application/json', ...client.headers, ...credentials };
  const query = new URLSearchParams();
  if (options.mode !== undefined) query.set('mode', options.mode);
  if (options.onConflict !== undefined) query.set('on_conflict', options.onConflict);
  if (options.dryRun !== undefined) query.set('dry_run', String(options.dryRun));
  const search = query.size > 0 ? `?${query.toString()}` : '';
  const posted = await fetch(`${baseUrl}${IMPORT_PATHS[options.collection]}${search}`, {
    method: 'POST',
    headers: {
      ...headers,
      'Content-Type': options.mediaType,
      ...(options.idempotencyKey === undefined ? {} : { 'Idempotency-Key': options.idempotencyKey }),
    },
    body: options.file as RequestInit['body'],
    ...(options.file instanceof ReadableStream ? { duplex: 'half' } : {}),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  } as RequestInit);
  if (posted.status !== 202) throw new RowiProblemError((await posted.json()) as Problem);
  const location = posted.headers.get('location')!;
  let operation = (await posted.json()) as ImportOperation;
  const deadline = Date.now() + (options.timeoutMs ?? 3_600_000);
  let wait = waitOf(posted, options.pollMs);
  while (operation.status === 'queued' || operation.status === 'running') {
    if (Date.now() + wait > deadline)
      throw new Error(`the import at ${location} had not ended after ${options.timeoutMs ?? 3_600_000} ms`);
    await new Promise((resolve) => setTimeout(resolve, wait));
    options.signal?.throwIfAborted();
    const read = await fetch(`${baseUrl}${location}`, {
      headers,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    if (read.status !== 200) throw new RowiProblemError((await read.json()) as Problem);
    operation = (await read.json()) as ImportOperation;
    wait = waitOf(read, options.pollMs);
  }
  return operation;
}

/** Retry-After's seconds, else the caller's interval. */
function waitOf(response: Response, pollMs = 1000): number {
  const seconds = Number(response.headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : pollMs;
}
