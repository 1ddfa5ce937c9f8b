import { request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { TestApp } from './app.js';
import { createItem, createUser, setStock } from './records.js';

/** One Server-Sent Event as received. */
export interface SseEvent {
  id: string;
  event: string;
  data: { id: string; type: string; path: string; data: Record<string, unknown> };
}

/** The last event of a stream the server ended: why, as an RFC 9457 problem. */
export interface StreamEnded {
  type: string;
  title: string;
  status: number;
  detail: string;
  [member: string]: unknown;
}

/**
 * A client of an event stream over a real socket: parses events and comments as they arrive,
 * keeping `stream.ended` (the server's word on why it ended a stream) apart from the events.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  /** The `stream.ended` event, if the server sent one. */
  endedWith: StreamEnded | undefined;
  /** Events that came after `stream.ended` (there must be none). */
  afterEnd = 0;
  comments = 0;
  retry: number | undefined;
  response!: IncomingMessage;
  #request!: ReturnType<typeof request>;
  #buffer = '';
  ended = false;
  /** The connection (its socket) has closed. */
  closed = false;

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
      client.#request.on('socket', (socket) => socket.once('close', () => (client.closed = true)));
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
      if (fields.data === undefined) continue;
      if (this.endedWith !== undefined) this.afterEnd++;
      if (fields.event === 'stream.ended') this.endedWith = JSON.parse(fields.data) as StreamEnded;
      else
        this.events.push({ id: fields.id!, event: fields.event!, data: JSON.parse(fields.data) as SseEvent['data'] });
    }
  }

  async waitFor(count: number, ms = 10_000): Promise<SseEvent[]> {
    const deadline = Date.now() + ms;
    while (this.events.length < count) {
      if (Date.now() > deadline)
        throw new Error(`the stream sent ${this.events.length} of ${count} events within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return this.events;
  }

  /** Waits until an event `matches` has come; false if none did within `ms`. */
  async waitUntil(matches: (event: SseEvent) => boolean, ms = 5000): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.events.some(matches)) {
      if (Date.now() > deadline || (this.ended && this.closed)) return false;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return true;
  }

  /** Waits until the server has ended the stream and its connection has closed; false if that took longer than `ms`. */
  async waitForClose(ms = 5000): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!(this.ended && this.closed)) {
      if (Date.now() > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return true;
  }

  close(): void {
    this.#request.destroy();
  }
}

/** A stream whose client reads its answer's head and then nothing more: a socket that stays paused. */
export interface UnreadStream {
  /** The status line and headers, read before the client stopped reading. */
  head: string;
  socket: Socket;
  /** Reads from now on; resolves, once the connection has closed, with the bytes read after resuming. */
  resume(): Promise<number>;
}

export function openUnreadStream(origin: string, headers: Record<string, string>): Promise<UnreadStream> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const lines = Object.entries({ host: `${hostname}:${port}`, accept: 'text/event-stream', ...headers }).map(
      ([name, value]) => `${name}: ${value}\r\n`,
    );
    socket.write(`GET /v1/events/stream HTTP/1.1\r\n${lines.join('')}\r\n`);
    socket.on('error', () => undefined);
    socket.once('error', reject);
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      socket.pause();
      socket.off('error', reject);
      resolve({
        head,
        socket,
        resume: () =>
          new Promise((resolveRead) => {
            let read = 0;
            // A reset can close even a paused socket.
            if (socket.closed) return resolveRead(read);
            socket.on('data', (more: Buffer) => (read += more.length));
            socket.once('close', () => resolveRead(read));
            socket.resume();
          }),
      });
    };
    socket.on('data', onData);
  });
}

/** The events made after `afterId`, oldest first, as an admin lists them (GET /v1/events, every page): what a stream is owed. */
export async function eventsMadeAfter(test: TestApp, afterId: string): Promise<{ id: string; type: string }[]> {
  const made: { id: string; type: string }[] = [];
  let url: string | null = '/v1/events?limit=500';
  while (url !== null) {
    const page: { data: { id: string; type: string }[]; next_cursor: string | null } = (await test.call({ url })).json;
    made.push(...page.data.filter((event) => event.id > afterId).map(({ id, type }) => ({ id, type })));
    url =
      page.next_cursor !== null && page.data.every((event) => event.id > afterId)
        ? `/v1/events?limit=500&cursor=${page.next_cursor}`
        : null;
  }
  return made.reverse();
}

/** Lines of a bulky order: each makes one event of the order and one stock move per line, about 50 KB of events in all. */
export const BULKY_LINES = 100;

/** Makes a user and BULKY_LINES items in stock; answers a function that places a bulky order on them (and its id). */
export async function bulkyOrders(test: TestApp): Promise<() => Promise<number>> {
  const { user } = await createUser(test);
  const lines: { item_id: number; quantity: number }[] = [];
  for (let index = 0; index < BULKY_LINES; index++) {
    const { item } = await createItem(test, { name: `Bulky ${index} ${'x'.repeat(150)}` });
    await setStock(test, item.id, 1_000_000);
    lines.push({ item_id: item.id, quantity: 1 });
  }
  return async () => {
    const order = await test.call({
      method: 'POST',
      url: '/v1/orders',
      body: { name: 'Bulky', user_id: user.id, lines },
    });
    if (order.status !== 201) throw new Error(`could not place a bulky order: ${order.status} ${order.text}`);
    return order.json.id as number;
  };
}
