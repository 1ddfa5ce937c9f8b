import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a receiver got: when, its headers and body. */
export interface Received {
  at: number;
  headers: IncomingMessage['headers'];
  body: string;
  /** The event in the body, parsed. */
  event: { id: string; type: string; path: string; data: Record<string, unknown> };
  /** The sender's port: requests on one connection share it. */
  connection: number;
}

/** How the receiver answers a request: a status, or its own handling of the raw exchange. */
export type Behaviour = (request: IncomingMessage, response: ServerResponse, received: Received) => void;

export const answer =
  (status: number, headers: Record<string, string> = {}): Behaviour =>
  (_request, response) => {
    response.writeHead(status, headers).end('{}');
  };

/** A webhook receiver on a loopback port: records every request and answers as told (200 by default). */
export class Receiver {
  readonly received: Received[] = [];
  behaviour: Behaviour = answer(200);
  /** How long the receiver keeps an idle connection open (Node's default 5 s); set before start. */
  idleTimeoutMs = 5000;
  #server: Server | undefined;
  #port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.#port}/hooks`;
  }

  async start(port = 0): Promise<this> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const received: Received = {
          at: Date.now(),
          headers: request.headers,
          body,
          event: JSON.parse(body) as Received['event'],
          connection: request.socket.remotePort ?? 0,
        };
        this.received.push(received);
        this.behaviour(request, response, received);
      });
    });
    this.#server.keepAliveTimeout = this.idleTimeoutMs;
    await new Promise<void>((resolve) => this.#server!.listen(port, '127.0.0.1', resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening (connections refused from now on); start(port) on the same port brings it back. */
  async stop(): Promise<number> {
    const port = this.#port;
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => this.#server?.close(() => resolve()) ?? resolve());
    return port;
  }

  /** Waits until `count` requests (of which `predicate` holds) arrived, or fails after `ms`. */
  async waitFor(
    count: number,
    ms = 10_000,
    predicate: (received: Received) => boolean = () => true,
  ): Promise<Received[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const matching = this.received.filter(predicate);
      if (matching.length >= count) return matching;
      if (Date.now() > deadline)
        throw new Error(`the receiver got ${matching.length} of ${count} requests within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Polls `read` until `done` holds of its value, or fails after `ms`; answers the last value. */
export async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`not reached within ${ms} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
