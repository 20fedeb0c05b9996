/**
 * Failed authentications per client address in a fixed window, in this node's memory.
 *
 * Why memory and not the database: a counter in PostgreSQL would give an attacker a way to load
 * the database with every wrong guess, and a per-node counter costs nothing. With N API nodes
 * behind a balancer an attacker gets at most N times the budget per window, which the scrypt cost
 * of every guess and the window length keep small (docs/security.md).
 *
 * A success does not reset the count: otherwise one valid account would let its owner keep
 * guessing another's password from the same address.
 */
import { isIPv6 } from 'node:net';

/**
 * The key failures are counted under: an IPv4 address as is (also when IPv4-mapped), an IPv6
 * address by its /64 prefix, since one IPv6 host usually holds a whole /64 and could otherwise
 * change address after every few guesses.
 */
export function addressBucket(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) {
    return mapped[1];
  }
  const bare = address.split('%')[0];
  if (!isIPv6(bare)) {
    return address;
  }
  const [head, tail] = bare.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = [
    ...headGroups,
    ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'),
    ...tailGroups,
  ];
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

export class AuthFailureLimiter {
  private readonly failures = new Map<string, { count: number; windowEnds: number }>();

  constructor(
    private readonly maxFailures: number,
    private readonly windowMs: number,
    /** Bound on tracked addresses, so a flood of spoofed sources cannot grow memory without end. */
    private readonly maxTracked = 10_000,
  ) {}

  /** Seconds until the address may try again, or 0 when it may try now. */
  retryAfterSeconds(address: string, now = Date.now()): number {
    const entry = this.failures.get(address);
    if (!entry || entry.windowEnds <= now) {
      return 0;
    }
    return entry.count >= this.maxFailures ? Math.ceil((entry.windowEnds - now) / 1000) : 0;
  }

  recordFailure(address: string, now = Date.now()): void {
    const entry = this.failures.get(address);
    if (entry && entry.windowEnds > now) {
      entry.count += 1;
      return;
    }
    if (this.failures.size >= this.maxTracked) {
      this.prune(now);
    }
    this.failures.delete(address);
    this.failures.set(address, { count: 1, windowEnds: now + this.windowMs });
  }

  private prune(now: number): void {
    for (const [address, entry] of this.failures) {
      if (entry.windowEnds <= now) {
        this.failures.delete(address);
      }
    }
    // Still full: forget the oldest windows first (a Map iterates in insertion order).
    for (const address of this.failures.keys()) {
      if (this.failures.size < this.maxTracked) {
        break;
      }
      this.failures.delete(address);
    }
  }
}
