import { Test } from '@nestjs/testing';
import { AppConfig, loadConfig } from '../config/app-config';
import { CallbackRetryPolicy } from './callback-retry.policy';

/** The policy as Nest builds it, from the configuration `env` gives. */
async function policyWith(env: Record<string, string>): Promise<CallbackRetryPolicy> {
  const module = await Test.createTestingModule({
    providers: [{ provide: AppConfig, useValue: loadConfig(env) }, CallbackRetryPolicy],
  }).compile();
  return module.get(CallbackRetryPolicy);
}

/**
 * Walks the schedule on a fake clock: each failed attempt is made when the previous retry time
 * comes; returns the delays between attempts (ms) until the policy gives up.
 */
function scheduleOf(policy: CallbackRetryPolicy): number[] {
  const endedAt = new Date();
  const delays: number[] = [];
  for (let attempts = 1; ; attempts++) {
    const next = policy.nextAttemptAt(endedAt, attempts, new Date());
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

  it('by default: 1 s, doubling, capped at 5 min, for up to an hour after the job ended', async () => {
    const policy = await policyWith({});
    const started = Date.now();
    const delays = scheduleOf(policy);
    expect(delays.slice(0, 10)).toEqual([
      1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000,
    ]);
    expect(delays.slice(9).every((delay) => delay === 300000)).toBe(true);
    // The last retry falls within the hour; one more would not.
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThanOrEqual(3600_000);
    expect(elapsed + 300000).toBeGreaterThan(3600_000);
    // 511 s for the doubling delays, then ten of 5 min: 20 attempts in all.
    expect(delays).toHaveLength(19);
  });

  it('follows CALLBACK_FIRST_RETRY_MS, CALLBACK_MAX_RETRY_DELAY_SECONDS and CALLBACK_RETRY_SECONDS', async () => {
    const policy = await policyWith({
      CALLBACK_FIRST_RETRY_MS: '200',
      CALLBACK_MAX_RETRY_DELAY_SECONDS: '1',
      CALLBACK_RETRY_SECONDS: '5',
    });
    // 200, 400, 800, then 1000 each, while the attempt still falls within 5 s of the end.
    expect(scheduleOf(policy)).toEqual([200, 400, 800, 1000, 1000, 1000]);
  });

  it('CALLBACK_RETRY_SECONDS=0: one attempt, no retry', async () => {
    const policy = await policyWith({ CALLBACK_RETRY_SECONDS: '0' });
    expect(scheduleOf(policy)).toEqual([]);
  });

  it('counts the retry period from the job end, not from the last attempt', async () => {
    const policy = await policyWith({ CALLBACK_RETRY_SECONDS: '10' });
    const endedAt = new Date();
    // The node was down for 9 s: a retry 2 s after this attempt would be past the period.
    jest.advanceTimersByTime(9000);
    expect(policy.nextAttemptAt(endedAt, 2, new Date())).toBeNull();
    expect(policy.nextAttemptAt(endedAt, 1, new Date())).toEqual(new Date(Date.now() + 1000));
  });

  it('a large attempt count stays at the cap', async () => {
    const policy = await policyWith({});
    expect(policy.delayAfter(1000)).toBe(300000);
  });
});
