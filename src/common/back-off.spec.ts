import { backOffDelay } from './back-off';

describe('backOffDelay', () => {
  const lowest = (): number => 0;
  const highest = (): number => 1;

  it('draws between half and all of the first delay for the first attempt', () => {
    expect(backOffDelay(1, 1000, 60_000, lowest)).toBe(500);
    expect(backOffDelay(1, 1000, 60_000, highest)).toBe(1000);
    expect(backOffDelay(1, 1000, 60_000, () => 0.5)).toBe(750);
  });

  it('doubles both bounds with each attempt', () => {
    const attempts = [1, 2, 3, 4, 5];
    expect(attempts.map((n) => backOffDelay(n, 1000, 60_000, lowest))).toEqual([
      500, 1000, 2000, 4000, 8000,
    ]);
    expect(attempts.map((n) => backOffDelay(n, 1000, 60_000, highest))).toEqual([
      1000, 2000, 4000, 8000, 16000,
    ]);
  });

  it('caps the doubled value at the maximum, then draws from half of it to all of it', () => {
    expect(backOffDelay(7, 1000, 60_000, highest)).toBe(60_000);
    expect(backOffDelay(7, 1000, 60_000, lowest)).toBe(30_000);
    expect(backOffDelay(6, 1000, 60_000, highest)).toBe(32_000);
  });

  it('stays finite and at the cap at attempt 1000, with or without a maximum', () => {
    expect(backOffDelay(1000, 1000, 300_000, highest)).toBe(300_000);
    expect(backOffDelay(1000, 1000, 300_000, lowest)).toBe(150_000);
    expect(backOffDelay(1000, 1e9, Number.POSITIVE_INFINITY, highest)).toBe(1e9 * 2 ** 64);
    expect(Number.isFinite(backOffDelay(1000, 1e9, Number.POSITIVE_INFINITY, lowest))).toBe(true);
  });

  it('a first delay of 0 is no wait at all; attempt 0 or less counts as the first', () => {
    expect(backOffDelay(5, 0, 60_000, highest)).toBe(0);
    expect(backOffDelay(0, 1000, 60_000, highest)).toBe(1000);
  });

  it('with Math.random, every draw falls within the bounds', () => {
    for (let i = 0; i < 1000; i++) {
      const delay = backOffDelay(3, 1000, 60_000);
      expect(delay).toBeGreaterThanOrEqual(2000);
      expect(delay).toBeLessThanOrEqual(4000);
      expect(Number.isInteger(delay)).toBe(true);
    }
  });
});
