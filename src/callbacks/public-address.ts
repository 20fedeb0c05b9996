import { isIP } from 'node:net';
import { IPv4, IPv6, parseCIDR } from 'ipaddr.js';

/**
 * IPv4 networks a callback must not reach unless its host is named exactly in the allow-list:
 * the service's own host and the networks behind it (loopback, private, link-local with cloud
 * metadata services, unspecified, carrier-grade NAT, IETF protocol assignments, benchmarking,
 * multicast, reserved and broadcast).
 */
const NON_PUBLIC_IPV4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
].map((cidr) => parseCIDR(cidr) as [IPv4, number]);

/**
 * IPv6 networks of the same kinds: unspecified, loopback, unique local, link-local, the old
 * site-local, multicast, the discard prefix and NAT64's local-use prefix (RFC 8215, whose IPv4
 * address may sit anywhere in it, so the whole prefix is refused).
 */
const NON_PUBLIC_IPV6 = [
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
  '100::/64',
  '64:ff9b:1::/48',
].map((cidr) => parseCIDR(cidr) as [IPv6, number]);

const cidr6 = (text: string): [IPv6, number] => parseCIDR(text) as [IPv6, number];

/** IPv6 prefixes whose last 32 bits are an IPv4 address the packet is meant for. */
const IPV4_IN_LAST_32_BITS = [
  cidr6('::ffff:0:0/96'), // IPv4-mapped
  cidr6('::ffff:0:0:0/96'), // IPv4-translated (RFC 6145)
  cidr6('64:ff9b::/96'), // NAT64's well-known prefix (RFC 6052)
  cidr6('::/96'), // IPv4-compatible (deprecated; ::1 and :: included, as 0.0.0.x)
];
const SIX_TO_FOUR = cidr6('2002::/16'); // 6to4: the IPv4 address in bits 16-47
const TEREDO = cidr6('2001::/32'); // Teredo: the client's IPv4 address, inverted, in the last 32

function ipv4Of(high: number, low: number): IPv4 {
  return new IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** The IPv4 address an IPv6 address carries (mapped, translated, NAT64, compatible, 6to4, Teredo). */
export function embeddedIPv4(address: IPv6): IPv4 | null {
  const parts = address.parts;
  if (IPV4_IN_LAST_32_BITS.some((range) => address.match(range))) {
    return ipv4Of(parts[6], parts[7]);
  }
  if (address.match(SIX_TO_FOUR)) {
    return ipv4Of(parts[1], parts[2]);
  }
  if (address.match(TEREDO)) {
    return ipv4Of(~parts[6] & 0xffff, ~parts[7] & 0xffff);
  }
  return null;
}

/**
 * An address as text (a URL's host without brackets, or a resolver's answer) parsed, or null
 * when it is not an address. A zone id is dropped. ipaddr.js 1.x reads a dotted IPv4 tail only
 * after `::ffff:`; the resolver writes `::127.0.0.1` that way too, so the tail is rewritten as
 * two hexadecimal groups first.
 */
export function parseAddress(text: string): IPv4 | IPv6 | null {
  const bare = text.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  switch (isIP(bare)) {
    case 4:
      return IPv4.parse(bare);
    case 6: {
      const tail = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(bare);
      if (!tail) {
        return IPv6.parse(bare);
      }
      const [a, b, c, d] = tail.slice(2).map(Number);
      return IPv6.parse(`${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
    }
    default:
      return null;
  }
}

/**
 * Why `address` is not public, or null when it is: a loopback, private, link-local or otherwise
 * non-public address, or an IPv6 address that carries such an IPv4 address. Text that is not an
 * address is never public.
 */
export function nonPublicReason(address: string): string | null {
  const parsed = parseAddress(address);
  if (parsed === null) {
    return `${address} is not an IP address`;
  }
  if (parsed.kind() === 'ipv4') {
    const ipv4 = parsed as IPv4;
    return NON_PUBLIC_IPV4.some((range) => ipv4.match(range))
      ? `${ipv4.toString()} is a loopback, private or link-local address`
      : null;
  }
  const ipv6 = parsed as IPv6;
  if (NON_PUBLIC_IPV6.some((range) => ipv6.match(range))) {
    return `${ipv6.toString()} is a loopback, private or link-local address`;
  }
  const carried = embeddedIPv4(ipv6);
  if (carried !== null && NON_PUBLIC_IPV4.some((range) => carried.match(range))) {
    return (
      `${ipv6.toString()} is a loopback, private or link-local address: it carries the IPv4 ` +
      `address ${carried.toString()}`
    );
  }
  return null;
}

/** True for an address in a loopback, private, link-local or otherwise non-public range. */
export function isNonPublicAddress(address: string): boolean {
  return nonPublicReason(address) !== null;
}
