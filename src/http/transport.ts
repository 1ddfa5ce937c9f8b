import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import { ConfigError, type Config } from '../config.js';

/** One year, the value browsers' preload lists expect (RFC 6797 §6.1.1). */
const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * How rowi meets the network (SPEC §5): HTTPS from ROWI_TLS_CERT/ROWI_TLS_KEY (HTTP/1.1), and
 * X-Forwarded-* believed only from the proxies named in ROWI_TRUST_PROXY, so that a direct
 * caller cannot pose as another address or as HTTPS.
 */
export function transportOptions(config: Config): { https?: { cert: Buffer; key: Buffer; minVersion: 'TLSv1.2' }; trustProxy?: string[] } {
  const options: ReturnType<typeof transportOptions> = {};
  if (config.tlsCert !== '') {
    options.https = { cert: readPem(config.tlsCert, 'ROWI_TLS_CERT'), key: readPem(config.tlsKey, 'ROWI_TLS_KEY'), minVersion: 'TLSv1.2' };
    try {
      createSecureContext(options.https);
    } catch (error) {
      throw new ConfigError(`ROWI_TLS_CERT and ROWI_TLS_KEY are not a usable PEM certificate and matching private key: ${(error as Error).message}`);
    }
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
