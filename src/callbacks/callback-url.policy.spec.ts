import { allowListMatch, isNonPublicAddress } from './callback-url.policy';

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
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each(['8.8.8.8', '172.32.0.1', '93.184.216.34', '2001:4860:4860::8888', '::ffff:8.8.8.8'])(
    '%s is public',
    (address) => {
      expect(isNonPublicAddress(address)).toBe(false);
    },
  );
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
