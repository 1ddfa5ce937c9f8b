import { describe, expect, it } from 'vitest';
import { specialPurpose } from '../../src/outbox/special-addresses.js';
import { AddressPolicy } from '../../src/outbox/ssrf.js';

/**
 * One address of every block of the IANA IPv4 and IPv6 Special-Purpose Address Registries (and
 * of the multicast, broadcast and site-local blocks), of the IPv6 space outside global unicast, and
 * of every IPv6 form that carries an IPv4 address, with the words the refusal must use.
 */
const REFUSED: [string, RegExp][] = [
  // IPv4 special-purpose registry
  ['0.0.0.0', /unspecified/],
  ['0.1.2.3', /unspecified/],
  ['10.1.2.3', /private/],
  ['100.64.0.1', /shared address/],
  ['127.0.0.1', /loopback/],
  ['127.255.255.254', /loopback/],
  ['169.254.169.254', /link-local/],
  ['172.16.0.1', /private/],
  ['172.31.255.255', /private/],
  ['192.0.0.9', /reserved/],
  ['192.0.0.170', /reserved/],
  ['192.0.2.1', /documentation/],
  ['192.31.196.1', /as112/],
  ['192.52.193.1', /amt/],
  ['192.88.99.1', /reserved/],
  ['192.168.1.1', /private/],
  ['192.175.48.1', /as112/],
  ['198.18.0.1', /reserved/],
  ['198.19.255.255', /reserved/],
  ['198.51.100.1', /documentation/],
  ['203.0.113.1', /documentation/],
  ['224.0.0.1', /multicast/],
  ['239.255.255.250', /multicast/],
  ['240.0.0.1', /reserved/],
  ['255.255.255.255', /broadcast/],
  // IPv6 special-purpose registry
  ['::', /unspecified/],
  ['::1', /loopback/],
  ['100::1', /discard/],
  ['100:0:0:1::1', /outside global unicast/],
  ['2001:1::1', /reserved/],
  ['2001:2::1', /benchmarking/],
  ['2001:3::1', /amt/],
  ['2001:4:112::1', /as112/],
  ['2001:10::1', /deprecatedOrchid/],
  ['2001:20::1', /orchid2/],
  ['2001:30::1', /droneRemoteId/],
  ['2001:db8::1', /documentation/],
  ['2620:4f:8000::1', /as112/],
  ['3fff::1', /documentation/],
  ['5f00::1', /segmentRouting/],
  ['fc00::1', /unique local/],
  ['fd12:3456::1', /unique local/],
  ['fe80::1', /link-local/],
  ['fec0::1', /site-local/],
  ['ff02::1', /multicast/],
  // outside 2000::/3, the only block allocated to global unicast
  ['4000::1', /outside global unicast/],
  ['e000::1', /outside global unicast/],
  // IPv4 carried in IPv6
  ['::ffff:127.0.0.1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
  ['::ffff:a9fe:a9fe', /IPv4-mapped form of 169\.254\.169\.254, a link-local/],
  ['::127.0.0.1', /IPv4-compatible address .* carrying 127\.0\.0\.1, a loopback/],
  ['::7f00:1', /IPv4-compatible address .* carrying 127\.0\.0\.1, a loopback/],
  ['::8.8.8.8', /IPv4-compatible address \(not globally reachable\) carrying 8\.8\.8\.8$/],
  ['::ffff:0:127.0.0.1', /IPv4-translated address .* carrying 127\.0\.0\.1, a loopback/],
  ['64:ff9b::127.0.0.1', /NAT64 \(64:ff9b::\/96\) form of 127\.0\.0\.1, a loopback/],
  ['64:ff9b::10.0.0.1', /NAT64 .* form of 10\.0\.0\.1, a private/],
  ['64:ff9b:1:7f00:0:100::', /local-use NAT64 .* carrying 127\.0\.0\.1, a loopback/],
  ['64:ff9b:1:808:8:800::', /local-use NAT64 .* carrying 8\.8\.8\.8$/],
  ['2002:7f00:1::', /6to4 address .* carrying 127\.0\.0\.1, a loopback/],
  ['2002:a00:1::1', /6to4 address .* carrying 10\.0\.0\.1, a private/],
  ['2002:808:808::1', /6to4 address \(not globally reachable\) carrying 8\.8\.8\.8$/],
  // Teredo: the client's address is the last 32 bits, inverted (~127.0.0.1 = 80ff:fffe)
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', /Teredo address .* carrying 127\.0\.0\.1, a loopback/],
];

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.215.14',
  '2606:4700:4700::1111',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
  '64:ff9b::8.8.8.8',
];

describe('specialPurpose', () => {
  it.each(REFUSED)('specialPurpose: %s is refused, saying what it is', (address, words) => {
    expect(specialPurpose(address)).toMatch(words);
  });

  it('specialPurpose: an address in a dotted IPv6 form is read as written (::a.b.c.d is IPv4-compatible, not mapped)', () => {
    expect(specialPurpose('::8.8.8.8')).toBe(specialPurpose('::808:808'));
    expect(specialPurpose('::ffff:0:8.8.8.8')).toBe(specialPurpose('::ffff:0:808:808'));
  });

  it.each(PUBLIC)('specialPurpose: %s, on the public internet, is not refused', (address) => {
    expect(specialPurpose(address)).toBeUndefined();
  });
});

describe('AddressPolicy: the allow-list and the URL forms', () => {
  it.each([
    ['https://[::127.0.0.1]/x', /IPv4-compatible/],
    ['https://[::ffff:0:127.0.0.1]/x', /IPv4-translated/],
    ['https://[2002:7f00:1::]/x', /6to4/],
    ['https://[64:ff9b::7f00:1]/x', /NAT64/],
    ['https://[64:ff9b:1:7f00:0:100::]/x', /local-use NAT64/],
    ['https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x', /Teredo/],
    ['https://0x7f.1/x', /127\.0\.0\.1, a loopback/],
    ['https://2130706433/x', /127\.0\.0\.1, a loopback/],
    ['https://0177.0.0.1/x', /127\.0\.0\.1, a loopback/],
    ['https://[fe80::1]/x', /link-local/],
  ])('AddressPolicy.urlRefusal: %s is refused whatever its form', (url, words) => {
    expect(new AddressPolicy('').urlRefusal(url)).toMatch(words);
  });

  it('AddressPolicy: an allow-listed range admits its IPv4-mapped and NAT64 forms, not the 6to4 or compatible ones', () => {
    const policy = new AddressPolicy('127.0.0.0/8,10.20.0.0/16');
    for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '64:ff9b::7f00:1', '::ffff:10.20.1.1', '10.20.255.1'])
      expect(policy.refusal(address), address).toBeUndefined();
    for (const address of ['::7f00:1', '2002:7f00:1::', '::ffff:0:7f00:1', '10.21.0.1'])
      expect(policy.refusal(address), address).toBeDefined();
  });

  it('AddressPolicy: an allow-listed IPv6 address or range admits exactly that', () => {
    const policy = new AddressPolicy('fd00:1::/32,::1');
    expect(policy.refusal('fd00:1:2::3')).toBeUndefined();
    expect(policy.refusal('::1')).toBeUndefined();
    expect(policy.refusal('fd00:2::1')).toMatch(/unique local/);
    expect(policy.urlRefusal('http://[fd00:1::5]:8080/x')).toBeUndefined();
  });
});
