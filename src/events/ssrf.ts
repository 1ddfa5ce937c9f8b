import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { AppError } from '../errors.js';

/**
 * Where webhooks may be sent (server-side request forgery): never to an address inside the
 * network rowi runs in (loopback, private, shared, link-local, multicast, reserved, the cloud
 * metadata address), unless ROWI_WEBHOOK_ALLOW_HOSTS names the host or a range that holds the
 * address; and over https only, unless the host is allow-listed. The rule is applied to the URL
 * when an endpoint is written, and to every address the host resolves to at each delivery: the
 * connection is made to the address that was checked, so a name that resolves elsewhere the
 * second time (DNS rebinding) gains nothing.
 */
const BLOCKED = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 128], ['::1', 128], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 23], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
] as const) BLOCKED.addSubnet(network, prefix, 'ipv6');

export class AddressPolicy {
  readonly #hosts = new Set<string>();
  readonly #ranges = new BlockList();

  constructor(allowHosts: string) {
    for (const entry of allowHosts.split(',').map((text) => text.trim()).filter((text) => text !== '')) {
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

  /** What kind of address may not be sent to ("a loopback, … address"), or undefined when it may. */
  refusal(address: string): string | undefined {
    const family = isIP(address);
    if (family === 0) return 'not an IP address';
    const plain = mappedV4(address) ?? address;
    const plainFamily = isIP(plain) === 4 ? 'ipv4' : 'ipv6';
    if (this.#ranges.check(plain, plainFamily) || this.#ranges.check(address, family === 4 ? 'ipv4' : 'ipv6')) return undefined;
    return BLOCKED.check(plain, plainFamily) ? 'a loopback, private, link-local, multicast or reserved address' : undefined;
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
    if (url.username !== '' || url.password !== '') return 'must not carry credentials (user:password@): put the secret in the signature';
    if (url.hash !== '') return 'must not have a fragment (#…)';
    const host = unbracket(url.hostname).toLowerCase();
    const allowed = this.hostAllowed(host);
    if (url.protocol === 'http:' && !allowed) return 'must use https (http:// only for hosts in ROWI_WEBHOOK_ALLOW_HOSTS)';
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
    dnsLookup(hostname, { all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const allowedByName = this.hostAllowed(hostname);
      for (const { address } of addresses) {
        const refused = allowedByName ? undefined : this.refusal(address);
        if (refused) return callback(Object.assign(new Error(`${hostname} resolves to ${address}, ${refused}; not sent (ROWI_WEBHOOK_ALLOW_HOSTS)`), { code: 'EADDRNOTALLOWED' }), '', 0);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      return callback(null, first.address, first.family);
    });
  };

  /** 422 webhook-url-refused when the URL, or an address its host resolves to now, may not be sent to. */
  async assertAllowed(url: string): Promise<void> {
    const refused = this.urlRefusal(url) ?? (await this.resolvedRefusal(new URL(url).hostname));
    if (refused) throw new AppError('webhook-url-refused', `The webhook URL ${refused}.`, { errors: [{ in: 'body', pointer: '#/url', detail: refused }] });
  }

  /** Every address the host resolves to that may not be sent to (empty when none, or when it does not resolve). */
  async resolvedRefusal(host: string, timeoutMs = 1000): Promise<string | undefined> {
    const bare = unbracket(host);
    if (isIP(bare) !== 0 || this.hostAllowed(bare)) return undefined;
    const addresses = await new Promise<LookupAddress[]>((resolve) => {
      const timer = setTimeout(() => resolve([]), timeoutMs);
      dnsLookup(bare, { all: true }, (error, found) => {
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

/** The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:127.0.0.1), if it is one. */
function mappedV4(address: string): string | undefined {
  const match = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (match) return match[1];
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return undefined;
  const high = parseInt(hex[1]!, 16);
  const low = parseInt(hex[2]!, 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}
