import { addressBucket, AuthFailureLimiter } from './auth-failure-limiter';

describe('AuthFailureLimiter', () => {
  it('blocks an address after the configured failures until its window ends', () => {
    const limiter = new AuthFailureLimiter(3, 60_000);
    const t0 = 1_000_000;
    limiter.recordFailure('10.0.0.1', t0);
    limiter.recordFailure('10.0.0.1', t0 + 1);
    expect(limiter.retryAfterSeconds('10.0.0.1', t0 + 2)).toBe(0);
    limiter.recordFailure('10.0.0.1', t0 + 2);
    expect(limiter.retryAfterSeconds('10.0.0.1', t0 + 3)).toBe(60);
    expect(limiter.retryAfterSeconds('10.0.0.1', t0 + 30_000)).toBe(30);
    expect(limiter.retryAfterSeconds('10.0.0.2', t0 + 3)).toBe(0);
    expect(limiter.retryAfterSeconds('10.0.0.1', t0 + 60_000)).toBe(0);
    // A new window starts from one failure.
    limiter.recordFailure('10.0.0.1', t0 + 60_001);
    expect(limiter.retryAfterSeconds('10.0.0.1', t0 + 60_002)).toBe(0);
  });

  it('tracks a bounded number of addresses, forgetting the oldest first', () => {
    const limiter = new AuthFailureLimiter(1, 60_000, 3);
    for (const address of ['a', 'b', 'c', 'd']) {
      limiter.recordFailure(address, 0);
    }
    expect(limiter.retryAfterSeconds('a', 1)).toBe(0);
    expect(limiter.retryAfterSeconds('d', 1)).toBe(60);
    expect(limiter.retryAfterSeconds('c', 1)).toBe(60);
  });
});

describe('addressBucket', () => {
  it('counts IPv4 per address and IPv6 per /64', () => {
    expect(addressBucket('10.1.2.3')).toBe('10.1.2.3');
    expect(addressBucket('::ffff:127.0.0.12')).toBe('127.0.0.12');
    expect(addressBucket('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8:1:2:bbbb:cccc:dddd:eeee')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8::7')).toBe('2001:db8:0:0::/64');
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    expect(addressBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressBucket('unknown')).toBe('unknown');
  });
});
