import { Test } from '@nestjs/testing';
import { RandomSource } from '../common/back-off';
import { loadConfig } from '../config/app-config';
import { configProviders } from '../config/config.module';
import { CallbackRetryPolicy } from './callback-retry.policy';

/** The policy as Nest builds it, from the configuration `env` gives. */
async function policyWith(env: Record<string, string>): Promise<CallbackRetryPolicy> {
  const module = await Test.createTestingModule({
    providers: [...configProviders(loadConfig(env)), CallbackRetryPolicy],
  }).compile();
  return module.get(CallbackRetryPolicy);
}

/** The jitter's draws at its bounds: the shortest wait (half) and the longest (all). */
const lowest: RandomSource = () => 0;
const highest: RandomSource = () => 1;

/**
 * Walks the schedule on a fake clock: each failed attempt is made when the previous retry time
 * comes; returns the delays between attempts (ms) until the policy gives up.
 */
function scheduleOf(policy: CallbackRetryPolicy, random: RandomSource = highest): number[] {
  const endedAt = new Date();
  const delays: number[] = [];
  for (let attempts = 1; ; attempts++) {
    const next = policy.nextAttemptAt(endedAt, attempts, new Date(), random);
    if (next === null) {
      return delays;
    }
    const delay = next.getTime() - Date.now();
    delays.push(delay);
    jest.advanceTimersByTime(delay);
  }
}

describe('CallbackRetryPolicy', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  // The jitter's bounds: with the longest draw, 511 s for the doubling delays, then ten of 5 min
  // (20 attempts in all); with the shortest, half of each: 255.5 s, then 22 of 2.5 min (32).
  it.each([
    { bound: 'at most', draw: highest, first: 1000, cap: 300000, retries: 19 },
    { bound: 'at least', draw: lowest, first: 500, cap: 150000, retries: 31 },
  ])(
    'by default: $bound $first ms, doubling, capped at $cap ms, for up to an hour after the job ended',
    async ({ draw, first, cap, retries }) => {
      const policy = await policyWith({});
      const started = Date.now();
      const delays = scheduleOf(policy, draw);
      expect(delays.slice(0, 10)).toEqual([
        ...[0, 1, 2, 3, 4, 5, 6, 7, 8].map((n) => first * 2 ** n),
        cap,
      ]);
      expect(delays.slice(9).every((delay) => delay === cap)).toBe(true);
      // The last retry falls within the hour; one more would not.
      const elapsed = Date.now() - started;
      expect(elapsed).toBeLessThanOrEqual(3600_000);
      expect(elapsed + cap).toBeGreaterThan(3600_000);
      expect(delays).toHaveLength(retries);
    },
  );

  it('draws each wait between those bounds', async () => {
    const policy = await policyWith({});
    for (let attempts = 1; attempts <= 12; attempts++) {
      const delay = policy.delayAfter(attempts);
      expect(delay).toBeGreaterThanOrEqual(policy.delayAfter(attempts, lowest));
      expect(delay).toBeLessThanOrEqual(policy.delayAfter(attempts, highest));
    }
  });

  it('follows CALLBACK_FIRST_RETRY_MS, CALLBACK_MAX_RETRY_DELAY_SECONDS and CALLBACK_RETRY_SECONDS', async () => {
    const policy = await policyWith({
      CALLBACK_FIRST_RETRY_MS: '200',
      CALLBACK_MAX_RETRY_DELAY_SECONDS: '1',
      CALLBACK_RETRY_SECONDS: '5',
    });
    // At most 200, 400, 800, then 1000 each, while the attempt still falls within 5 s of the end.
    expect(scheduleOf(policy, highest)).toEqual([200, 400, 800, 1000, 1000, 1000]);
  });

  it('CALLBACK_RETRY_SECONDS=0: one attempt, no retry', async () => {
    const policy = await policyWith({ CALLBACK_RETRY_SECONDS: '0' });
    expect(scheduleOf(policy, highest)).toEqual([]);
    expect(scheduleOf(policy, lowest)).toEqual([]);
  });

  it('counts the retry period from the job end, not from the last attempt', async () => {
    const policy = await policyWith({ CALLBACK_RETRY_SECONDS: '10' });
    const endedAt = new Date();
    // The node was down for 9 s: a retry 2 s after this attempt would be past the period.
    jest.advanceTimersByTime(9000);
    expect(policy.nextAttemptAt(endedAt, 2, new Date(), highest)).toBeNull();
    expect(policy.nextAttemptAt(endedAt, 1, new Date(), highest)).toEqual(
      new Date(Date.now() + 1000),
    );
  });

  it('a large attempt count stays at the cap', async () => {
    const policy = await policyWith({});
    expect(policy.delayAfter(1000, highest)).toBe(300000);
    expect(policy.delayAfter(1000, lowest)).toBe(150000);
  });
});
