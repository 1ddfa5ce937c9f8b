import type { Config } from '../config/config.js';

/**
 * The origin of rowi's own address as callers reach it: the scheme (https with ROWI_TLS_CERT),
 * the host and the port rowi listens on (those of the settings until it listens: ROWI_PORT 0
 * picks the port only then). A wildcard address stands for the loopback address of its family
 * (0.0.0.0 → 127.0.0.1, :: → ::1); an IPv6 address is bracketed.
 */
export function listenOrigin(
  config: Pick<Config, 'host' | 'port' | 'tlsCert'>,
  listening: { address: string; port: number } = { address: config.host, port: config.port },
): string {
  const host = listening.address === '0.0.0.0' ? '127.0.0.1' : listening.address === '::' ? '::1' : listening.address;
  return `${config.tlsCert === '' ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${listening.port}`;
}
