import { QueueNotifier } from '../queue/queue-notifier.service';
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

/** The real notifier on an embedded database: in-process events only, no LISTEN connection. */
function notifier(): QueueNotifier {
  return new QueueNotifier({ kind: 'embedded', socketDirectory: '/nonexistent' });
}

describe('ResultWaiter', () => {
  it('polls with back-off until the result is there', async () => {
    const { repository, looks } = table(4);
    const started = Date.now();
    expect(await new ResultWaiter(repository, notifier()).waitFor('demo', 'j', 10000)).toBe(RESULT);
    expect(looks()).toBe(4);
    // 25 + 50 + 100 ms of pauses.
    expect(Date.now() - started).toBeGreaterThanOrEqual(170);
  });

  it('gives up (null) at the time limit, after a last look', async () => {
    const { repository, looks } = table(Infinity);
    const started = Date.now();
    expect(await new ResultWaiter(repository, notifier()).waitFor('demo', 'j', 300)).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(looks()).toBeGreaterThanOrEqual(4);
  });

  it('stops when the signal aborts', async () => {
    const { repository } = table(Infinity);
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    const started = Date.now();
    expect(
      await new ResultWaiter(repository, notifier()).waitFor('demo', 'j', 10000, abort.signal),
    ).toBeNull();
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('looks again at once when the result-ready notification names the job', async () => {
    let ready = false;
    const repository = {
      findMetadata: () => Promise.resolve(ready ? RESULT : null),
    } as unknown as ResultRepository;
    const events = notifier();
    const waiter = new ResultWaiter(repository, events);
    const started = Date.now();
    const waiting = waiter.waitFor('demo', 'j', 10000);
    // Past the short first pauses, into a long one; another job's notification must not wake it.
    await new Promise((resolve) => setTimeout(resolve, 900));
    events.resultStored('other');
    ready = true;
    events.resultStored('j');
    expect(await waiting).toBe(RESULT);
    // Pauses so far: 25+50+100+200+400 ms; without the wake-up the next look would come at ~1575 ms.
    expect(Date.now() - started).toBeLessThan(1300);
  });
});
