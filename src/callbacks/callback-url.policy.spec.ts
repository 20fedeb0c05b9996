import { LookupAddress, LookupOptions } from 'node:dns';
import { allowListMatch, pinnedLookup } from './callback-url.policy';
import { isNonPublicAddress, nonPublicReason } from './public-address';

describe('isNonPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '127.1.2.3',
    '10.0.0.1',
    '172.16.5.4',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '0.0.0.0',
    '100.64.0.1',
    '::1',
    '::',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    'fec0::1',
    '100::1',
    '64:ff9b:1::a00:1',
    'fe80::1%eth0',
    'not-an-address',
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '172.32.0.1',
    '93.184.216.34',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '::ffff:0:808:808',
    // Teredo: the client 8.8.8.8, inverted in the last 32 bits.
    '2001:0:4136:e378:8000:63bf:f7f7:f7f7',
  ])('%s is public', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });
});

describe('an IPv6 address that carries an IPv4 address is judged by that address', () => {
  it.each([
    ['IPv4-compatible', '::127.0.0.1', '127.0.0.1'],
    ['IPv4-compatible in hex', '::7f00:1', '127.0.0.1'],
    ['IPv4-mapped in hex', '::ffff:7f00:1', '127.0.0.1'],
    ['IPv4-translated', '::ffff:0:127.0.0.1', '127.0.0.1'],
    ['IPv4-translated in hex', '::ffff:0:a00:1', '10.0.0.1'],
    ['NAT64', '64:ff9b::169.254.169.254', '169.254.169.254'],
    ['NAT64 in hex', '64:ff9b::c0a8:101', '192.168.1.1'],
    ['6to4', '2002:7f00:1::1', '127.0.0.1'],
    ['6to4 of a private network', '2002:ac10:0101::', '172.16.1.1'],
    ['Teredo (the client inverted)', '2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1'],
  ])('%s %s carries %s, and is not public', (_form, address, carried) => {
    expect(nonPublicReason(address)).toContain(`carries the IPv4 address ${carried}`);
    expect(isNonPublicAddress(address)).toBe(true);
  });
});

describe('pinnedLookup', () => {
  const addresses: LookupAddress[] = [
    { address: '203.0.113.7', family: 4 },
    { address: '2001:db8::7', family: 6 },
  ];
  function ask(
    hostname: string,
    options: LookupOptions,
  ): { error: NodeJS.ErrnoException | null; address: unknown; family?: number } {
    let answer: { error: NodeJS.ErrnoException | null; address: unknown; family?: number } | null =
      null;
    pinnedLookup('hooks.example.com', addresses)(hostname, options, (error, address, family) => {
      answer = { error, address, family };
    });
    if (answer === null) {
      throw new Error('no answer');
    }
    return answer;
  }

  it('answers the checked host with the checked addresses only, all or one family', () => {
    expect(ask('hooks.example.com', { all: true })).toMatchObject({ address: addresses });
    expect(ask('Hooks.Example.com.', {})).toMatchObject({ address: '203.0.113.7', family: 4 });
    expect(ask('hooks.example.com', { family: 6 })).toMatchObject({
      address: '2001:db8::7',
      family: 6,
    });
    expect(ask('hooks.example.com', { family: 'IPv6', all: true })).toMatchObject({
      address: [addresses[1]],
    });
  });

  it('refuses any other name', () => {
    expect(ask('other.example.com', { all: true }).error?.code).toBe('ENOTFOUND');
  });
});

describe('allowListMatch', () => {
  it('names a host exactly, whatever its case, brackets or final dot', () => {
    expect(allowListMatch('Hooks.Example.com', ['hooks.example.com'])).toBe('exact');
    expect(allowListMatch('hooks.example.com.', ['hooks.example.com'])).toBe('exact');
    expect(allowListMatch('[::1]', ['::1'])).toBe('exact');
    expect(allowListMatch('::1', ['[::1]'])).toBe('exact');
  });

  it('admits by a pattern: * any host, *.domain its subdomains but not the domain itself', () => {
    expect(allowListMatch('a.example.com', ['*.example.com'])).toBe('pattern');
    expect(allowListMatch('a.b.example.com', ['*.example.com'])).toBe('pattern');
    expect(allowListMatch('example.com', ['*.example.com'])).toBeNull();
    expect(allowListMatch('badexample.com', ['*.example.com'])).toBeNull();
    expect(allowListMatch('anything.org', ['*'])).toBe('pattern');
  });

  it('admits nothing else', () => {
    expect(allowListMatch('localhost', ['127.0.0.1'])).toBeNull();
    expect(allowListMatch('example.com', [])).toBeNull();
  });
});
