import { Test } from '@nestjs/testing';
import { loadConfig } from '../config/app-config';
import { inProcessEvents } from '../../test/support/in-process-events';
import { DatabaseEvents } from '../storage/database-events.service';
import { JobWaiter } from './job-waiter.service';
import { QueueNotifier } from './queue-notifier.service';

/** A look at a table that holds the value once `ready` is set; counts the looks. */
function table(): { look: () => Promise<string | null>; looks: () => number; ready: () => void } {
  let looks = 0;
  let ready = false;
  return {
    look: () => {
      looks += 1;
      return Promise.resolve(ready ? 'result' : null);
    },
    looks: () => looks,
    ready: () => (ready = true),
  };
}

/** Lets pending promise callbacks run (fake timers do not advance them). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i += 1) {
    await Promise.resolve();
  }
}

describe('JobWaiter', () => {
  let waiter: JobWaiter;
  let notifier: QueueNotifier;

  beforeEach(async () => {
    jest.useFakeTimers();
    // The real notifier on an embedded database: in-process events, no LISTEN connection.
    const module = await Test.createTestingModule({
      providers: [
        JobWaiter,
        QueueNotifier,
        { provide: DatabaseEvents, useValue: inProcessEvents() },
      ],
    }).compile();
    waiter = module.get(JobWaiter);
    notifier = module.get(QueueNotifier);
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('answers at once when the first look finds the value', async () => {
    const t = table();
    t.ready();
    await expect(waiter.waitFor('j', t.look, 60_000)).resolves.toBe('result');
    expect(t.looks()).toBe(1);
  });

  it('looks again only when its job is notified, not on a timer', async () => {
    const t = table();
    const waiting = waiter.waitFor('j', t.look, 60_000);
    await settle();
    await jest.advanceTimersByTimeAsync(20_000);
    expect(t.looks()).toBe(1); // 20 s of waiting cost no further look
    notifier.resultStored('another-job');
    await settle();
    expect(t.looks()).toBe(1);
    t.ready();
    notifier.resultStored('j');
    await expect(waiting).resolves.toBe('result');
    expect(t.looks()).toBe(2);
  });

  it('gives up with null at the deadline', async () => {
    const t = table();
    const waiting = waiter.waitFor('j', t.look, 5_000);
    await settle();
    await jest.advanceTimersByTimeAsync(4_999);
    let answered = false;
    void waiting.then(() => (answered = true));
    await settle();
    expect(answered).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await expect(waiting).resolves.toBeNull();
  });

  it('looks every 30 s as a backstop for a notification that never came', async () => {
    const t = table();
    const waiting = waiter.waitFor('j', t.look, 60_000);
    await jest.advanceTimersByTimeAsync(29_999);
    expect(t.looks()).toBe(1);
    t.ready();
    await jest.advanceTimersByTimeAsync(1);
    await expect(waiting).resolves.toBe('result');
    expect(t.looks()).toBe(2);
  });

  it('wakes on a job start only when asked to', async () => {
    const t = table();
    const forResult = waiter.waitFor('j', t.look, 10_000);
    const u = table();
    const forChange = waiter.waitFor('j', u.look, 10_000, { events: 'result-or-start' });
    await settle();
    t.ready();
    u.ready();
    notifier.jobsStarted(['j']);
    await expect(forChange).resolves.toBe('result');
    await settle();
    expect(t.looks()).toBe(1);
    await jest.advanceTimersByTimeAsync(10_000);
    await expect(forResult).resolves.toBeNull(); // the start did not wake it
    expect(t.looks()).toBe(1);
  });

  it('stops with null when the signal aborts', async () => {
    const t = table();
    const abort = new AbortController();
    const waiting = waiter.waitFor('j', t.look, 60_000, { signal: abort.signal });
    await settle();
    abort.abort();
    await expect(waiting).resolves.toBeNull();
    expect(t.looks()).toBe(1);
  });

  it('looks every POLL_INTERVAL_MS on a node without a LISTEN connection (behind a pooler)', async () => {
    const polling = new QueueNotifier(
      inProcessEvents({ kind: 'server', url: 'postgres://pooler.invalid/svc', listenUrl: null }),
      loadConfig({ POLL_INTERVAL_MS: '500' }),
    );
    const t = table();
    const waiting = new JobWaiter(polling).waitFor('j', t.look, 60_000);
    await settle();
    await jest.advanceTimersByTimeAsync(2_000);
    expect(t.looks()).toBe(5); // the first look and one per 500 ms
    t.ready();
    await jest.advanceTimersByTimeAsync(500);
    await expect(waiting).resolves.toBe('result');
    polling.onApplicationShutdown();
  });
});
