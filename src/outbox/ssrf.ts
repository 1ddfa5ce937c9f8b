import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { AppError } from '../errors.js';
import { reachedIPv4, specialPurpose } from './special-addresses.js';

/** How a host name is resolved to every address it has (node:dns's `lookup` with `all`). */
export type Resolver = (
  hostname: string,
  options: { all: true },
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * Where webhooks may be sent (server-side request forgery): never to an address that is not on
 * the public internet (special-addresses.ts: the IANA special-purpose registries, multicast, IPv6
 * outside global unicast, and the IPv4 address inside IPv6 forms), unless ROWI_WEBHOOK_ALLOW_HOSTS
 * names the host or a range that holds the address; and over https only, unless the host is
 * allow-listed. The rule is applied to the URL when an endpoint is written and before every
 * attempt (an endpoint written while the allow-list said otherwise is not sent to), and to every
 * address the host resolves to at each connection: the connection is made to the address that was
 * checked, so a name that resolves elsewhere the second time (DNS rebinding) gains nothing.
 */
export class AddressPolicy {
  readonly #hosts = new Set<string>();
  readonly #ranges = new BlockList();
  readonly #resolve: Resolver;

  /** `resolve` is node:dns's look-up but in tests, where a name must resolve to a given address. */
  constructor(allowHosts: string, resolve: Resolver = dnsLookup) {
    this.#resolve = resolve;
    for (const entry of allowHosts
      .split(',')
      .map((text) => text.trim())
      .filter((text) => text !== '')) {
      const [address = '', prefix] = entry.split('/');
      const family = isIP(address);
      if (family === 0) this.#hosts.add(entry.toLowerCase());
      else if (prefix === undefined) this.#ranges.addAddress(address, family === 4 ? 'ipv4' : 'ipv6');
      else this.#ranges.addSubnet(address, Number(prefix), family === 4 ? 'ipv4' : 'ipv6');
    }
  }

  /** Whether the host (a name, or an address literal) is named by the allow-list. */
  hostAllowed(host: string): boolean {
    const bare = unbracket(host).toLowerCase();
    if (this.#hosts.has(bare)) return true;
    const family = isIP(bare);
    return family !== 0 && this.#ranges.check(bare, family === 4 ? 'ipv4' : 'ipv6');
  }

  /** What kind of address may not be sent to ("a loopback address", …), or undefined when it may. */
  refusal(address: string): string | undefined {
    const family = isIP(address);
    if (family === 0) return 'not an IP address';
    if (this.#ranges.check(address, family === 4 ? 'ipv4' : 'ipv6')) return undefined;
    const reached = reachedIPv4(address);
    if (reached !== undefined && this.#ranges.check(reached, 'ipv4')) return undefined;
    return specialPurpose(address);
  }

  /**
   * What is wrong with a webhook URL before any name is resolved, or undefined: the scheme,
   * credentials, a fragment, https without an allow-listed host, an address literal or a name
   * that is always local (localhost).
   */
  urlRefusal(text: string): string | undefined {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return 'is not an absolute URL';
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https:// URL';
    if (url.username !== '' || url.password !== '')
      return 'must not carry credentials (user:password@): put the secret in the signature';
    if (url.hash !== '') return 'must not have a fragment (#…)';
    const host = unbracket(url.hostname).toLowerCase();
    const allowed = this.hostAllowed(host);
    if (url.protocol === 'http:' && !allowed)
      return 'must use https (http:// only for hosts in ROWI_WEBHOOK_ALLOW_HOSTS)';
    if (allowed) return undefined;
    if (host === 'localhost' || host.endsWith('.localhost')) return `names ${host}, a loopback host`;
    if (isIP(host) !== 0) {
      const refused = this.refusal(host);
      if (refused) return `names ${host}, ${refused}`;
    }
    return undefined;
  }

  /**
   * Resolves the host and answers the first address, after checking every address it resolves
   * to (an answer mixing a public and a private address is refused). A dns.lookup replacement for
   * node:http's `lookup` option.
   */
  readonly lookup = (
    hostname: string,
    options: { family?: number | string; all?: boolean },
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    this.#resolve(hostname, { all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const allowedByName = this.hostAllowed(hostname);
      for (const { address } of addresses) {
        const refused = allowedByName ? undefined : this.refusal(address);
        if (refused)
          return callback(
            Object.assign(
              new Error(`${hostname} resolves to ${address}, ${refused}; not sent (ROWI_WEBHOOK_ALLOW_HOSTS)`),
              { code: 'EADDRNOTALLOWED' },
            ),
            '',
            0,
          );
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      return callback(null, first.address, first.family);
    });
  };

  /** 422 webhook-url-refused when the URL, or an address its host resolves to now, may not be sent to. */
  async assertAllowed(url: string): Promise<void> {
    const refused = this.urlRefusal(url) ?? (await this.resolvedRefusal(new URL(url).hostname));
    if (refused)
      throw new AppError('webhook-url-refused', `The webhook URL ${refused}.`, {
        errors: [{ in: 'body', pointer: '#/url', detail: refused }],
      });
  }

  /** Every address the host resolves to that may not be sent to (empty when none, or when it does not resolve). */
  async resolvedRefusal(host: string, timeoutMs = 1000): Promise<string | undefined> {
    const bare = unbracket(host);
    if (isIP(bare) !== 0 || this.hostAllowed(bare)) return undefined;
    const addresses = await new Promise<LookupAddress[]>((resolve) => {
      const timer = setTimeout(() => resolve([]), timeoutMs);
      this.#resolve(bare, { all: true }, (error, found) => {
        clearTimeout(timer);
        resolve(error ? [] : found);
      });
    });
    for (const { address } of addresses) {
      const refused = this.refusal(address);
      if (refused) return `resolves to ${address}, ${refused}`;
    }
    return undefined;
  }
}

function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}
