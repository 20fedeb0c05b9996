import { LogThrottle } from './log-throttle';

describe('LogThrottle', () => {
  beforeEach(() => jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') }));
  afterEach(() => jest.useRealTimers());

  it('lets one line a minute through per key, saying how many it held back', () => {
    const throttle = new LogThrottle(60_000);
    const out: Array<number | null> = [];
    for (let second = 0; second <= 120; second += 1) {
      out.push(throttle.admit('a'));
      jest.advanceTimersByTime(1_000);
    }
    expect(out.filter((held) => held !== null)).toEqual([0, 59, 59]);
    expect(out[0]).toBe(0);
    expect(out[60]).toBe(59);
    expect(out[120]).toBe(59);
  });

  it('keeps keys apart, and starts a key afresh once it has been quiet', () => {
    const throttle = new LogThrottle(60_000);
    expect(throttle.admit('a')).toBe(0);
    expect(throttle.admit('b')).toBe(0);
    expect(throttle.admit('a')).toBeNull();
    jest.advanceTimersByTime(120_000);
    expect(throttle.admit('b')).toBe(0);
    expect(throttle.admit('a')).toBe(0);
  });
});
