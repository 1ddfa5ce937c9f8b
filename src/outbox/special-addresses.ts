import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which IP addresses are not on the public internet, for the webhook address policy (ssrf.ts).
 *
 * The ranges come from ipaddr.js (kept beside Express's and Fastify's proxy-addr), which names
 * every block of the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890) and the
 * multicast, broadcast and site-local ones: an address it does not call `unicast` is refused,
 * whether the registry marks it globally reachable (AS112, AMT, the anycast services) or not, as no
 * webhook receiver lives there. Two things it does not do are done here:
 *
 * - IPv6 outside 2000::/3 is refused: the IANA IPv6 Address Space registry allocates only that
 *   block to global unicast; the rest is reserved by the IETF (the IPv4-compatible ::a.b.c.d of
 *   RFC 4291 §2.5.5.1 among it, and RFC 9780's dummy prefix 100:0:0:1::/64).
 * - The IPv4 address inside the IPv6 forms that carry one is found and named: IPv4-mapped
 *   (::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96, RFC 6052) reach it, so they are
 *   judged as it; IPv4-compatible, IPv4-translated (::ffff:0:0:0/96), local-use NAT64
 *   (64:ff9b:1::/48, RFC 8215), 6to4 (2002::/16, RFC 3056) and Teredo (2001::/32, RFC 4380)
 *   are refused whatever they carry (none is globally reachable), the reason naming what they carry.
 */

const WORDS: Record<string, string> = {
  unspecified: 'the unspecified address',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address (the cloud metadata address 169.254.169.254 is one)',
  loopback: 'a loopback address',
  carrierGradeNat: 'a shared address (carrier-grade NAT, RFC 6598)',
  private: 'a private address',
  uniqueLocal: 'a private address (IPv6 unique local)',
  deprecatedSiteLocal: 'a site-local address',
  reserved: 'a reserved or documentation address',
  benchmarking: 'a benchmarking address',
};

/** Where an IPv6 form carries an IPv4 address; `reaches`: a connection to it goes to that IPv4 address. */
interface Embedded {
  form: string;
  ipv4: ipaddr.IPv4;
  reaches: boolean;
}

const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const ipv4Of = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 255, low >> 8, low & 255]);

function embeddedIPv4(address: ipaddr.IPv6): Embedded | undefined {
  const parts = address.parts;
  const range = address.range() as string;
  if (range === 'ipv4Mapped') return { form: 'IPv4-mapped', ipv4: address.toIPv4Address(), reaches: true };
  if (address.match(NAT64_WELL_KNOWN))
    return { form: 'NAT64 (64:ff9b::/96)', ipv4: ipv4Of(parts[6]!, parts[7]!), reaches: true };
  if (range === 'rfc6052') {
    // RFC 6052 §2.2, a /48 prefix: the address's first 16 bits, then (past the u octet, bits 64–71) its last 16.
    return {
      form: 'local-use NAT64 (64:ff9b:1::/48)',
      ipv4: new ipaddr.IPv4([parts[3]! >> 8, parts[3]! & 255, parts[4]! & 255, parts[5]! >> 8]),
      reaches: false,
    };
  }
  if (range === 'rfc6145') return { form: 'IPv4-translated', ipv4: ipv4Of(parts[6]!, parts[7]!), reaches: false };
  if (range === '6to4') return { form: '6to4', ipv4: ipv4Of(parts[1]!, parts[2]!), reaches: false };
  // RFC 4380 §4: the client's address is the last 32 bits, inverted (the server's is in bits 32–63).
  if (range === 'teredo')
    return { form: 'Teredo', ipv4: ipv4Of(parts[6]! ^ 0xffff, parts[7]! ^ 0xffff), reaches: false };
  if (address.match(COMPATIBLE) && !(range === 'unspecified' || range === 'loopback'))
    return { form: 'IPv4-compatible', ipv4: ipv4Of(parts[6]!, parts[7]!), reaches: false };
  return undefined;
}

/**
 * The address parsed, with an IPv6 address's dotted tail first written in hexadecimal: ipaddr.js
 * reads ::a.b.c.d as IPv4-mapped (::ffff:a.b.c.d), which it is not (RFC 4291 §2.5.5.1).
 */
function parse(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (isIP(address) === 0) return undefined;
  const dotted = isIP(address) === 6 ? /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address) : null;
  if (dotted === null) return ipaddr.parse(address);
  const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
  return ipaddr.parse(`${dotted[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
}

/** The IPv4 address a connection to this address reaches (itself, or the one an IPv4-mapped or NAT64 address carries). */
export function reachedIPv4(address: string): string | undefined {
  const parsed = parse(address);
  if (parsed === undefined) return undefined;
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const embedded = embeddedIPv4(parsed as ipaddr.IPv6);
  return embedded?.reaches ? embedded.ipv4.toString() : undefined;
}

/** Why rowi must not connect to this address ("a loopback address", …), or undefined for a public one. */
export function specialPurpose(address: string): string | undefined {
  const parsed = parse(address);
  if (parsed === undefined) return 'not an IP address';
  if (parsed.kind() === 'ipv4') return ipv4Refusal(parsed as ipaddr.IPv4);
  const v6 = parsed as ipaddr.IPv6;
  const embedded = embeddedIPv4(v6);
  if (embedded !== undefined) {
    const carried = ipv4Refusal(embedded.ipv4);
    if (embedded.reaches) return carried && `the ${embedded.form} form of ${embedded.ipv4.toString()}, ${carried}`;
    return `${embedded.form.startsWith('IPv4') ? 'an' : 'a'} ${embedded.form} address (not globally reachable) carrying ${embedded.ipv4.toString()}${carried ? `, ${carried}` : ''}`;
  }
  const range = v6.range() as string;
  if (range !== 'unicast') return named(range);
  if (!v6.match(GLOBAL_UNICAST)) return 'an address outside global unicast (2000::/3), reserved by the IETF';
  return undefined;
}

function ipv4Refusal(address: ipaddr.IPv4): string | undefined {
  const range = address.range() as string;
  return range === 'unicast' ? undefined : named(range);
}

function named(range: string): string {
  return WORDS[range] ?? `a special-purpose address (IANA registry: ${range})`;
}
