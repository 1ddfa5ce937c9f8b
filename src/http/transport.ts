import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { clientErrorHandler, serverTimeouts } from './timeouts.js';

export { listenOrigin } from './listen-origin.js';

/** One year, the value browsers' preload lists expect (RFC 6797 §6.1.1). */
const HSTS = 'max-age=31536000; includeSubDomains';

/** What Node's HTTP and HTTPS servers take at creation: later is too late for the checking interval. */
interface NodeServerTimeouts {
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
}

export interface TransportOptions {
  https?: { cert: Buffer; key: Buffer; minVersion: 'TLSv1.2' } & NodeServerTimeouts;
  http: NodeServerTimeouts;
  trustProxy?: string[];
  connectionTimeout: number;
  keepAliveTimeout: number;
  requestTimeout: number;
  clientErrorHandler: typeof clientErrorHandler;
}

/**
 * How rowi meets the network (docs/security.md): HTTPS from ROWI_TLS_CERT/ROWI_TLS_KEY (HTTP/1.1),
 * X-Forwarded-* believed only from the proxies named in ROWI_TRUST_PROXY, so that a direct
 * caller cannot pose as another address or as HTTPS, and the time-outs of every phase of a
 * connection (timeouts.ts).
 */
export function transportOptions(config: Config): TransportOptions {
  const { headersTimeout, requestTimeout, keepAliveTimeout, connectionTimeout, connectionsCheckingInterval } =
    serverTimeouts(config);
  const node: NodeServerTimeouts = { headersTimeout, requestTimeout, connectionsCheckingInterval };
  // Fastify passes `http` to http.createServer only; an HTTPS server takes them with its TLS options.
  const options: TransportOptions = {
    http: node,
    connectionTimeout,
    keepAliveTimeout,
    requestTimeout,
    clientErrorHandler,
  };
  if (config.tlsCert !== '') {
    const tls = {
      cert: readPem(config.tlsCert, 'ROWI_TLS_CERT'),
      key: readPem(config.tlsKey, 'ROWI_TLS_KEY'),
      minVersion: 'TLSv1.2' as const,
    };
    try {
      createSecureContext(tls);
    } catch (error) {
      throw new ConfigError(
        `ROWI_TLS_CERT and ROWI_TLS_KEY are not a usable PEM certificate and matching private key: ${(error as Error).message}`,
      );
    }
    options.https = { ...tls, ...node };
  }
  if (config.trustProxy !== '') options.trustProxy = config.trustProxy.split(',');
  return options;
}

/** Strict-Transport-Security on every response that travelled over HTTPS (RFC 6797 §7.2: never over plain HTTP). */
export function registerHsts(app: FastifyInstance, config: Config): void {
  if (config.tlsCert === '' && config.trustProxy === '') return;
  app.addHook('onRequest', (request, reply, done) => {
    if (request.protocol === 'https') reply.header('strict-transport-security', HSTS);
    done();
  });
}

function readPem(file: string, setting: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new ConfigError(`${setting}=${JSON.stringify(file)} cannot be read: ${(error as Error).message}`);
  }
}

/**
 * The origin callers use, the issuer of rowi's tokens and of the OAuth metadata: ROWI_PUBLIC_URL
 * when it is set, else the listen origin (`listened`: listenOrigin's).
 */
export function publicOrigin(config: Pick<Config, 'publicUrl'>, listened: string): string {
  return config.publicUrl !== '' ? config.publicUrl : listened;
}
