import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 that forwards every connection to one target (PostgreSQL), and can be
 * switched off and on: stop() is "the database went away" (every open connection is cut on both
 * sides and new ones are refused), start() is "it is back" (on the same port, so a client's URL
 * stays valid). The real server, which other test files share, is never touched.
 */
export interface TcpProxy {
  readonly host: '127.0.0.1';
  /** Fixed for the proxy's life: the port of the first listen, reused by start(). */
  readonly port: number;
  /** Connections accepted so far (both stopped and running phases). */
  readonly accepted: number;
  /** Connections currently open through the proxy. */
  readonly open: number;
  readonly listening: boolean;
  /** Cuts every open connection (both sides) and closes the listening socket: connecting is refused. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  /** stop(), for good. */
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  if (!['127.0.0.1', 'localhost', '::1'].includes(target.host))
    throw new Error(`the test proxy only forwards to loopback, not ${target.host}`);
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  let accepted = 0;
  let port = 0;
  let server: Server | undefined;

  const onConnection = (client: Socket) => {
    accepted++;
    const upstream = createConnection({ host: target.host, port: target.port });
    const pair = { client, upstream };
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.pipe(upstream);
    upstream.pipe(client);
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer(onConnection);
      next.once('error', reject);
      next.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
        next.off('error', reject);
        port = (next.address() as { port: number }).port;
        server = next;
        resolve();
      });
    });

  const stop = async () => {
    const current = server;
    server = undefined;
    for (const { client, upstream } of pairs) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
    if (current) await new Promise<void>((resolve) => current.close(() => resolve()));
  };

  await listen();
  return {
    host: '127.0.0.1',
    get port() {
      return port;
    },
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs.size;
    },
    get listening() {
      return server !== undefined;
    },
    stop,
    async start() {
      if (server === undefined) await listen();
    },
    close: stop,
  };
}

/** The same connection URL with host and port replaced by the proxy's (the query, e.g. `options`, is kept). */
export function viaProxy(url: string, proxy: Pick<TcpProxy, 'host' | 'port'>): string {
  const parsed = new URL(url);
  parsed.hostname = proxy.host;
  parsed.port = String(proxy.port);
  return parsed.toString();
}
