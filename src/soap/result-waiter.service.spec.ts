import type { ResultMetadata, ResultRepository } from '../results/result.repository';
import { ResultWaiter } from './result-waiter.service';

const RESULT: ResultMetadata = {
  jobId: 'j',
  applicationName: 'demo',
  resultTime: new Date(),
  success: true,
  type: 'zip',
};

/** A result table that has the result from the `readyAfter`-th look on. */
function table(readyAfter: number): { repository: ResultRepository; looks: () => number } {
  let looks = 0;
  const repository = {
    findMetadata: () => Promise.resolve(++looks >= readyAfter ? RESULT : null),
  } as unknown as ResultRepository;
  return { repository, looks: () => looks };
}

describe('ResultWaiter', () => {
  it('polls with back-off until the result is there', async () => {
    const { repository, looks } = table(4);
    const started = Date.now();
    expect(await new ResultWaiter(repository).waitFor('demo', 'j', 10000)).toBe(RESULT);
    expect(looks()).toBe(4);
    // 25 + 50 + 100 ms of pauses.
    expect(Date.now() - started).toBeGreaterThanOrEqual(170);
  });

  it('gives up (null) at the time limit, after a last look', async () => {
    const { repository, looks } = table(Infinity);
    const started = Date.now();
    expect(await new ResultWaiter(repository).waitFor('demo', 'j', 300)).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(looks()).toBeGreaterThanOrEqual(4);
  });

  it('stops when the signal aborts', async () => {
    const { repository } = table(Infinity);
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    const started = Date.now();
    expect(await new ResultWaiter(repository).waitFor('demo', 'j', 10000, abort.signal)).toBeNull();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
