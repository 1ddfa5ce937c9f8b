import { createReadStream, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Reply, TestApp } from './app.js';

/** Uploads of import files over a real socket (docs/bulk.md "Imports"), and following their operation. */
export class Importer {
  #files = 0;

  constructor(
    readonly test: TestApp,
    readonly base: string,
    readonly folder: string,
  ) {}

  /**
   * Writes `text` to a file and streams it from disk as the body of POST /v1/{collection}/import,
   * with the admin's key, another `key`, or the credentials in `headers` (a bearer token).
   */
  async upload(
    collection: string,
    text: string | Buffer,
    {
      type = 'text/csv',
      query = '',
      key = this.test.adminKey,
      headers = {},
    }: { type?: string; query?: string; key?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const path = join(this.folder, `file-${++this.#files}`);
    writeFileSync(path, text);
    const response = await fetch(`${this.base}/v1/${collection}/import${query}`, {
      method: 'POST',
      // Credentials of another kind (a bearer token) replace the key; other headers come besides it.
      headers: {
        'content-type': type,
        ...(headers.authorization === undefined ? { 'x-api-key': key } : {}),
        ...headers,
      },
      body: createReadStream(path) as unknown as RequestInit['body'],
      duplex: 'half',
    } as RequestInit);
    const body = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!;
    return { status: response.status, headers: Object.fromEntries(response.headers), text: body, json, mediaType };
  }

  /** The operation at `location` once it has ended, read with the admin's key (or `key`, or the credentials in `headers`). */
  async finished(location: string, key = this.test.adminKey, headers?: Record<string, string>): Promise<Reply> {
    for (let attempt = 0; attempt < 800; attempt++) {
      const reply = await this.test.call({ url: location, key, ...(headers ? { headers } : {}) });
      if (reply.status !== 200 || !['queued', 'running'].includes(reply.json.status)) return reply;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`operation ${location} did not end`);
  }
}
