/** A number in [0, 1), as Math.random gives; tests pass a fixed one. */
export type RandomSource = () => number;

/**
 * Past 2^64 the doubling is beyond any cap we set; stopping there keeps the product finite
 * (no Infinity, no NaN from Infinity × 0) for any attempt count.
 */
const MAX_DOUBLINGS = 64;

/**
 * The wait before trying again after the `attempt`-th failure (1 for the first), in whole
 * milliseconds: `firstMs` doubled for each further attempt, at most `maxMs`, with "equal
 * jitter": drawn between half and all of that value. The whole value stays the upper bound, so
 * a setting keeps its meaning as the longest wait, and the lower half is a floor; the draw
 * spreads the retries of many failures that happened together (a database or peer that came
 * back) instead of sending them all at the same instant.
 */
export function backOffDelay(
  attempt: number,
  firstMs: number,
  maxMs: number,
  random: RandomSource = Math.random,
): number {
  const doublings = Math.min(Math.max(attempt - 1, 0), MAX_DOUBLINGS);
  const ceiling = Math.min(firstMs * 2 ** doublings, maxMs);
  const half = ceiling / 2;
  return Math.round(half + random() * half);
}
