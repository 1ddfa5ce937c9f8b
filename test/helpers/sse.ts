import { request, type IncomingMessage } from 'node:http';

/** One Server-Sent Event as received. */
export interface SseEvent {
  id: string;
  event: string;
  data: { id: string; type: string; path: string; data: Record<string, unknown> };
}

/** A client of an event stream over a real socket: parses events and comments as they arrive. */
export class SseClient {
  readonly events: SseEvent[] = [];
  comments = 0;
  retry: number | undefined;
  response!: IncomingMessage;
  #request!: ReturnType<typeof request>;
  #buffer = '';
  ended = false;

  /** Opens the stream; resolves with the response (its status and headers) once they arrive. */
  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const client = new SseClient();
    await new Promise<void>((resolve, reject) => {
      client.#request = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
        client.response = response;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => client.#feed(chunk));
        response.on('end', () => (client.ended = true));
        response.on('error', () => (client.ended = true));
        resolve();
      });
      client.#request.on('error', reject);
      client.#request.end();
    });
    return client;
  }

  /** The body of a refused stream (a problem), once it has ended. */
  async text(): Promise<string> {
    while (!this.ended) await new Promise((resolve) => setTimeout(resolve, 10));
    return this.#buffer;
  }

  #feed(chunk: string): void {
    if (this.response.statusCode !== 200) {
      this.#buffer += chunk;
      return;
    }
    this.#buffer += chunk;
    let end: number;
    while ((end = this.#buffer.indexOf('\n\n')) !== -1) {
      const block = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      const fields: Record<string, string> = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments++;
        else {
          const colon = line.indexOf(':');
          fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
        }
      }
      if (fields.retry !== undefined) this.retry = Number(fields.retry);
      if (fields.data !== undefined) this.events.push({ id: fields.id!, event: fields.event!, data: JSON.parse(fields.data) as SseEvent['data'] });
    }
  }

  async waitFor(count: number, ms = 10_000): Promise<SseEvent[]> {
    const deadline = Date.now() + ms;
    while (this.events.length < count) {
      if (Date.now() > deadline) throw new Error(`the stream sent ${this.events.length} of ${count} events within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return this.events;
  }

  close(): void {
    this.#request.destroy();
  }
}
