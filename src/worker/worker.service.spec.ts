import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { loadConfig } from '../config/app-config';
import { configProviders } from '../config/config.module';
import { resultData } from '../job-core/job-result';
import { REngineUnavailableError } from '../r-engine/r-engine';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { inProcessEvents } from '../../test/support/in-process-events';
import { QueueRepository } from '../queue/queue.repository';
import { NodeIdentity } from '../storage/node-identity';
import {
  JOB_EXECUTOR,
  type ClaimedJob,
  type ExpiredJob,
  type JobExecutor,
  type JobKind,
  type ResultData,
} from '../queue/queue.types';
import { JobEndedElsewhere, WorkerService } from './worker.service';

/** In-memory stand-in for the queue's SQL: enough to watch the worker's decisions. */
class FakeQueue {
  queued: ClaimedJob[] = [];
  completed: Array<{ id: string; owner: string | null; result: ResultData }> = [];
  retried: Array<{ id: string; error: string; delayMs: number }> = [];
  released: string[] = [];
  claimCalls: Array<{ limit: number; applicationName: string | null }> = [];
  /** Jobs whose lease another node holds now: heartbeat() no longer returns them. */
  leasesLost = new Set<string>();
  heartbeats: string[][] = [];
  /** Jobs the next supervisor pass finds with an expired lease and no attempt left. */
  exhausted: ExpiredJob[] = [];

  claim(
    _owner: string,
    limit: number,
    _lease: number,
    applicationName: string | null,
    kinds: readonly JobKind[] | null = null,
    more: { kinds: readonly JobKind[]; limit: number } | null = null,
  ): Promise<ClaimedJob[]> {
    this.claimCalls.push({ limit, applicationName });
    const ofApplication = this.queued.filter(
      (j) => applicationName === null || j.applicationName === applicationName,
    );
    const taken = [
      ...ofApplication.filter((j) => kinds === null || kinds.includes(j.kind)).slice(0, limit),
      ...ofApplication.filter((j) => more?.kinds.includes(j.kind)).slice(0, more?.limit ?? 0),
    ];
    this.queued = this.queued.filter((j) => !taken.includes(j));
    return Promise.resolve(taken.map((j) => ({ ...j, attempts: j.attempts + 1 })));
  }
  complete(id: string, owner: string | null, result: ResultData): Promise<boolean> {
    this.completed.push({ id, owner, result });
    return Promise.resolve(true);
  }
  retryLater(id: string, _owner: string, error: string, delayMs: number): Promise<boolean> {
    this.retried.push({ id, error, delayMs });
    return Promise.resolve(true);
  }
  release(_owner: string, ids: string[]): Promise<number> {
    this.released.push(...ids);
    return Promise.resolve(ids.length);
  }
  heartbeat(_owner: string, ids: string[]): Promise<string[]> {
    this.heartbeats.push(ids);
    return Promise.resolve(ids.filter((id) => !this.leasesLost.has(id)));
  }
  /** Like the SQL: each job out of attempts is stored with its dead letter in the same step. */
  recoverExpiredLeases(
    _maxAttempts: number,
    _lostRunDelaySeconds: number,
    deadLetter: (job: ExpiredJob) => ResultData,
  ): Promise<{ requeued: number; exhausted: ExpiredJob[] }> {
    const exhausted = this.exhausted;
    this.exhausted = [];
    for (const job of exhausted) {
      this.completed.push({ id: job.id, owner: 'supervisor', result: deadLetter(job) });
    }
    return Promise.resolve({ requeued: 0, exhausted });
  }
  deleteExpiredResults(): Promise<number> {
    return Promise.resolve(0);
  }
  deleteExpiredUsage(): Promise<number> {
    return Promise.resolve(0);
  }
}

function job(
  id: string,
  applicationName = 'demo',
  attempts = 0,
  kind: JobKind = 'script',
): ClaimedJob {
  return {
    id,
    applicationName,
    kind,
    meta: {},
    submittedAt: new Date('2026-11-22T09:00:00.000Z'),
    attempts,
    source: 'rest',
    hasCallback: false,
    files: [],
    trace: null,
  };
}

async function settle(worker: WorkerService, queue: FakeQueue, count: number): Promise<void> {
  for (
    let i = 0;
    i < 200 &&
    (queue.completed.length + queue.retried.length < count || worker.runningJobIds.length > 0);
    i++
  ) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('WorkerService', () => {
  // The real notifier: without a server database it only reports within the process.
  const notifier = new QueueNotifier(inProcessEvents());
  let reported: string[] = [];
  notifier.onResultReady((jobId) => reported.push(jobId));
  beforeEach(() => {
    reported = [];
  });

  /** The worker as Nest builds it, on the fake queue; lifecycle hooks are the test's to call. */
  async function workerWith(
    queue: FakeQueue,
    executor: JobExecutor,
    env: NodeJS.ProcessEnv = {},
  ): Promise<WorkerService> {
    const config = loadConfig({
      POLL_INTERVAL_MS: '100000',
      SCRIPT_SLOTS: '2',
      RETRY_BACKOFF_MS: '1000',
      MAX_ATTEMPTS: '3',
      ...env,
    });
    const module = await Test.createTestingModule({
      providers: [
        WorkerService,
        ...configProviders(config),
        { provide: QueueRepository, useValue: queue },
        { provide: QueueNotifier, useValue: notifier },
        { provide: JOB_EXECUTOR, useValue: executor },
        NodeIdentity,
      ],
    }).compile();
    return module.get(WorkerService);
  }

  it('runs function calls in slots of their own while scripts take every script slot', async () => {
    const queue = new FakeQueue();
    queue.queued = [
      job('s1'),
      job('s2'),
      job('s3'),
      job('f1', 'demo', 0, 'json'),
      job('f2', 'demo', 0, 'xml'),
    ];
    const started: string[] = [];
    let releaseScripts = (): void => undefined;
    const scriptsMayEnd = new Promise<void>((resolve) => (releaseScripts = resolve));
    const executor: JobExecutor = {
      execute: async (claimed) => {
        started.push(claimed.id);
        if (claimed.kind === 'script') {
          await scriptsMayEnd;
        }
        return resultData(true, 'json', 'application/json', Buffer.from(claimed.id));
      },
    };
    const worker = await workerWith(queue, executor, { SCRIPT_SLOTS: '2', FUNCTION_SLOTS: '1' });
    worker.wake();
    for (let i = 0; i < 200 && queue.completed.length < 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Both calls ran (one slot, in turn) while two scripts held the script slots.
    expect(queue.completed.map((c) => c.id)).toEqual(['f1', 'f2']);
    expect(started.filter((id) => id.startsWith('s'))).toEqual(['s1', 's2']);
    releaseScripts();
    await settle(worker, queue, 5);
    expect(queue.completed.map((c) => c.id).sort()).toEqual(['f1', 'f2', 's1', 's2', 's3']);
  });

  it('a job queued of a kind whose slots are full starts no claim; one of another kind does', async () => {
    const queue = new FakeQueue();
    queue.queued = [job('s1')];
    let releaseScript = (): void => undefined;
    const scriptMayEnd = new Promise<void>((resolve) => (releaseScript = resolve));
    const executor: JobExecutor = {
      execute: async (claimed) => {
        if (claimed.kind === 'script') {
          await scriptMayEnd;
        }
        return resultData(true, 'json', 'application/json', Buffer.from(claimed.id));
      },
    };
    const worker = await workerWith(queue, executor, { SCRIPT_SLOTS: '1', FUNCTION_SLOTS: '1' });
    worker.wake();
    for (let i = 0; i < 200 && worker.runningJobIds.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const claimsWhileBusy = queue.claimCalls.length;
    queue.queued.push(job('s2'));
    worker.wake('script');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(queue.claimCalls.length).toBe(claimsWhileBusy);
    queue.queued.push(job('f1', 'demo', 0, 'json'));
    worker.wake('json');
    for (let i = 0; i < 200 && queue.completed.length < 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(queue.completed.map((c) => c.id)).toEqual(['f1']);
    releaseScript();
    await settle(worker, queue, 3);
    expect(queue.completed.map((c) => c.id).sort()).toEqual(['f1', 's1', 's2']);
  });

  it('claims again after a job ends only when jobs of its kinds may be waiting', async () => {
    const queue = new FakeQueue();
    queue.queued = [job('only')];
    const executor: JobExecutor = {
      execute: (claimed) =>
        Promise.resolve(resultData(true, 'zip', 'application/zip', Buffer.from(claimed.id))),
    };
    const worker = await workerWith(queue, executor, { SCRIPT_SLOTS: '2', FUNCTION_SLOTS: '1' });
    worker.wake();
    await settle(worker, queue, 1);
    // Asked for two, got one: nothing else waited, and its end asks for nothing more.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(queue.claimCalls).toHaveLength(1);
    // Three jobs for two slots: the claim that fills the pool may have left some behind, so
    // each end claims again until a claim comes back short.
    queue.queued = [job('a'), job('b'), job('c')];
    worker.wake('script');
    await settle(worker, queue, 4);
    expect(queue.completed.map((c) => c.id).sort()).toEqual(['a', 'b', 'c', 'only']);
    expect(queue.claimCalls.length).toBeGreaterThanOrEqual(3);
  });

  it('holds a free slot for a submission and runs the job it is handed; none when full, capped or stopping', async () => {
    const queue = new FakeQueue();
    let finish = (): void => undefined;
    const mayFinish = new Promise<void>((resolve) => (finish = resolve));
    const executor: JobExecutor = {
      execute: async (claimed) => {
        await mayFinish;
        return resultData(true, 'zip', 'application/zip', Buffer.from(claimed.id));
      },
    };
    const worker = await workerWith(queue, executor, {
      SCRIPT_SLOTS: '1',
      FUNCTION_SLOTS: '1',
      APPLICATION_SETTINGS: '{"capped":{"maxRunningJobs":1}}',
    });
    expect(worker.hold('c1', 'capped', 'script')).toBeNull();
    expect(worker.hold('cb', 'demo', 'callback')).toBeNull();
    const held = worker.hold('s1', 'demo', 'script');
    expect(held).toMatchObject({ owner: worker.owner, kinds: ['script'] });
    // Held, the slot is taken: neither a second submission nor a claim gets it.
    expect(worker.hold('s2', 'demo', 'script')).toBeNull();
    expect(worker.rSlots).toEqual({ slots: 2, busy: 1 });
    held?.release();
    const again = worker.hold('s3', 'demo', 'script');
    again?.start(job('s3'));
    expect(worker.runningJobIds).toEqual(['s3']);
    // A second answer for the same hold changes nothing.
    again?.release();
    expect(worker.rSlots.busy).toBe(1);
    const call = worker.hold('f1', 'demo', 'json');
    call?.start(job('f1', 'demo', 0, 'json'));
    expect(worker.runningJobIds.sort()).toEqual(['f1', 's3']);
    // Started without a claim.
    expect(queue.claimCalls).toEqual([]);
    finish();
    await settle(worker, queue, 2);
    expect(queue.completed.map((c) => c.id).sort()).toEqual(['f1', 's3']);
    await worker.onApplicationShutdown();
    expect(worker.hold('s4', 'demo', 'script')).toBeNull();
  });

  it('never runs more jobs at once than it has slots', async () => {
    const queue = new FakeQueue();
    queue.queued = ['a', 'b', 'c', 'd', 'e'].map((id) => job(id));
    let running = 0;
    let most = 0;
    const executor: JobExecutor = {
      execute: async (claimed) => {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 10));
        running--;
        return resultData(true, 'zip', 'application/zip', Buffer.from(claimed.id));
      },
    };
    const worker = await workerWith(queue, executor);
    worker.wake();
    await settle(worker, queue, 5);
    expect(queue.completed.map((c) => c.id).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    // Each stored result is reported to this node's waiters.
    expect([...reported].sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(most).toBe(2);
    expect(queue.claimCalls.every((call) => call.limit <= 2)).toBe(true);
  });

  it('claims for dedicated application slots separately', async () => {
    const queue = new FakeQueue();
    queue.queued = [job('v', 'vip')];
    const executor: JobExecutor = {
      execute: () => Promise.resolve(resultData(true, 'zip', 'application/zip', Buffer.alloc(0))),
    };
    const worker = await workerWith(queue, executor, {
      SCRIPT_SLOTS: '1',
      APPLICATION_SLOTS: '{"vip":1}',
    });
    worker.wake();
    await settle(worker, queue, 1);
    expect(queue.claimCalls.map((c) => c.applicationName)).toEqual(
      expect.arrayContaining([null, 'vip']),
    );
  });

  // The jitter's draw at its bounds: all of RETRY_BACKOFF_MS for the first retry, or half.
  it.each([
    { draw: 1, delayMs: 1000 },
    { draw: 0, delayMs: 500 },
  ])(
    'retries an unavailable R with exponential back-off (draw $draw: $delayMs ms), then stores a dead-letter result',
    async ({ draw, delayMs }) => {
      const random = jest.spyOn(Math, 'random').mockReturnValue(draw);
      const queue = new FakeQueue();
      queue.queued = [job('first', 'demo', 0), job('last', 'demo', 2)];
      const executor: JobExecutor = {
        execute: () => Promise.reject(new REngineUnavailableError('no R')),
      };
      const worker = await workerWith(queue, executor);
      worker.wake();
      await settle(worker, queue, 2);
      random.mockRestore();
      expect(queue.retried).toEqual([{ id: 'first', error: 'no R', delayMs }]);
      expect(queue.completed).toHaveLength(1);
      expect(reported).toEqual(['last']);
      const deadLetter = queue.completed[0];
      expect(deadLetter).toMatchObject({ id: 'last', result: { success: false, type: 'txt' } });
      expect(deadLetter.result.data.toString()).toMatch(
        /^Job last of application demo, submitted 2026-11-22T09:00:00.000Z, failed\.\nThe job could not be delivered to R after 3 attempt\(s\): no R/,
      );
    },
  );

  it('hands unfinished jobs back on shutdown after the grace period', async () => {
    const queue = new FakeQueue();
    queue.queued = [job('long')];
    const executor: JobExecutor = {
      execute: (_job, signal) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => reject(new Error('aborted'))),
        ),
    };
    const worker = await workerWith(queue, executor, { SHUTDOWN_GRACE_SECONDS: '0' });
    worker.wake();
    for (let i = 0; i < 100 && worker.runningJobIds.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await worker.onApplicationShutdown();
    expect(queue.released).toEqual(['long']);
    expect(queue.completed).toEqual([]);
    expect(queue.retried).toEqual([]);
  });

  it('aborts a run whose result was stored elsewhere (a cancel) and stores nothing itself', async () => {
    const queue = new FakeQueue();
    queue.queued = [job('cancelled')];
    let reason: unknown;
    const executor: JobExecutor = {
      execute: (_job, signal) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            reason = signal.reason;
            reject(new Error('aborted'));
          }),
        ),
    };
    const worker = await workerWith(queue, executor);
    await worker.onApplicationBootstrap();
    for (let i = 0; i < 100 && worker.runningJobIds.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // What the cancel statement's notification reports on this node.
    notifier.resultStored('cancelled');
    await settle(worker, queue, 0);
    expect(reason).toBeInstanceOf(JobEndedElsewhere);
    expect(worker.runningJobIds).toEqual([]);
    expect(queue.completed).toEqual([]);
    expect(queue.retried).toEqual([]);
    await worker.onApplicationShutdown();
  });

  describe('its timers (fake: the heartbeat and supervisor intervals pass at once)', () => {
    const timing = { LEASE_SECONDS: '30', HEARTBEAT_SECONDS: '5' };
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('aborts a job whose lease a heartbeat no longer returns, and stores no result for it', async () => {
      const queue = new FakeQueue();
      queue.queued = [job('kept'), job('lost')];
      const signals = new Map<string, AbortSignal>();
      let finishKept = (): void => undefined;
      const keptMayEnd = new Promise<void>((resolve) => (finishKept = resolve));
      const executor: JobExecutor = {
        execute: async (claimed, signal) => {
          signals.set(claimed.id, signal);
          if (claimed.id === 'kept') {
            await keptMayEnd;
          } else {
            await new Promise((resolve) => signal.addEventListener('abort', resolve));
          }
          // An engine that still answers once stopped: a late result must not be stored.
          return resultData(true, 'zip', 'application/zip', Buffer.from(claimed.id));
        },
      };
      const worker = await workerWith(queue, executor, timing);
      await worker.onApplicationBootstrap();
      await jest.advanceTimersByTimeAsync(0);
      expect(worker.runningJobIds).toEqual(['kept', 'lost']);

      queue.leasesLost.add('lost');
      await jest.advanceTimersByTimeAsync(4_999);
      expect(queue.heartbeats).toEqual([]);
      expect(signals.get('lost')?.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(queue.heartbeats).toEqual([['kept', 'lost']]);
      expect(signals.get('lost')?.aborted).toBe(true);
      expect(signals.get('kept')?.aborted).toBe(false);
      expect(worker.runningJobIds).toEqual(['kept']);

      finishKept();
      await jest.advanceTimersByTimeAsync(0);
      expect(queue.completed.map((c) => c.id)).toEqual(['kept']);
      expect(reported).toEqual(['kept']);
      expect(queue.retried).toEqual([]);
      expect(worker.runningJobIds).toEqual([]);
      await worker.onApplicationShutdown();
    });

    it('does not take a job that finished during a heartbeat for one that lost its lease', async () => {
      const queue = new FakeQueue();
      queue.queued = [job('quick')];
      let finish = (): void => undefined;
      const mayEnd = new Promise<void>((resolve) => (finish = resolve));
      const executor: JobExecutor = {
        execute: async (claimed) => {
          await mayEnd;
          return resultData(true, 'zip', 'application/zip', Buffer.from(claimed.id));
        },
      };
      // The heartbeat's statement runs while the job ends: it finds the job DONE, not RUNNING.
      let answerHeartbeat = (): void => undefined;
      queue.heartbeat = (_owner, ids) => {
        queue.heartbeats.push(ids);
        return new Promise((resolve) => (answerHeartbeat = () => resolve([])));
      };
      const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        const worker = await workerWith(queue, executor, timing);
        await worker.onApplicationBootstrap();
        await jest.advanceTimersByTimeAsync(5_000);
        expect(queue.heartbeats).toEqual([['quick']]);
        finish();
        await jest.advanceTimersByTimeAsync(0);
        expect(queue.completed.map((c) => c.id)).toEqual(['quick']);
        answerHeartbeat();
        await jest.advanceTimersByTimeAsync(0);
        expect(warnings.mock.calls.flat().join('\n')).not.toMatch(/lease lost/);
        await worker.onApplicationShutdown();
      } finally {
        warnings.mockRestore();
      }
    });

    it('stores a dead-letter result for a job whose lease expired with no attempt left', async () => {
      const queue = new FakeQueue();
      const executor: JobExecutor = {
        execute: () => Promise.reject(new Error('this test claims no job')),
      };
      const worker = await workerWith(queue, executor, timing);
      await worker.onApplicationBootstrap();
      // Its worker died during the last attempt; the next supervisor pass (every half lease) finds it.
      queue.exhausted = [
        {
          id: 'orphan',
          applicationName: 'demo',
          submittedAt: new Date('2026-11-22T09:00:00.000Z'),
          attempts: 3,
          lastError: 'R was unreachable',
        },
      ];
      await jest.advanceTimersByTimeAsync(14_999);
      expect(queue.completed).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(queue.completed).toHaveLength(1);
      const deadLetter = queue.completed[0];
      expect(deadLetter).toMatchObject({
        id: 'orphan',
        owner: 'supervisor',
        result: { success: false, type: 'txt' },
      });
      expect(deadLetter.result.data.toString()).toMatch(
        /^Job orphan of application demo, submitted 2026-11-22T09:00:00.000Z, failed\.\nThe job could not be delivered to R after 3 attempt\(s\): R was unreachable/,
      );
      expect(reported).toEqual(['orphan']);
      await worker.onApplicationShutdown();
    });
  });

  describe('a result the database cannot take at once', () => {
    /** A queue whose complete() fails with `error` `failures` times, counting the offers. */
    function failingQueue(
      failures: number,
      error: Error,
    ): { queue: FakeQueue; offers: () => number } {
      const queue = new FakeQueue();
      queue.queued = [job('cut')];
      const complete = queue.complete.bind(queue);
      let offers = 0;
      queue.complete = (id, owner, result) => {
        offers += 1;
        return offers <= failures ? Promise.reject(error) : complete(id, owner, result);
      };
      return { queue, offers: () => offers };
    }
    const executor: JobExecutor = {
      execute: () => Promise.resolve(resultData(true, 'zip', 'application/zip', Buffer.alloc(0))),
    };
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('is offered again, backing off from a second, while the database is unreachable, then stored', async () => {
      const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
        code: 'ECONNREFUSED',
      });
      const { queue, offers } = failingQueue(2, refused);
      const worker = await workerWith(queue, executor);
      // The longest draw of the back-off: 1 s after the first offer, 2 s after the second.
      const random = jest.spyOn(Math, 'random').mockReturnValue(1);
      worker.wake();
      await jest.advanceTimersByTimeAsync(1500);
      expect(offers()).toBe(2);
      await jest.advanceTimersByTimeAsync(1000);
      expect(queue.completed).toEqual([]);
      await jest.advanceTimersByTimeAsync(1000);
      random.mockRestore();
      expect(offers()).toBe(3);
      expect(queue.completed.map((c) => c.id)).toEqual(['cut']);
      expect(worker.runningJobIds).toEqual([]);
    });

    it('is not offered again when the database answered with an error', async () => {
      const rejected = Object.assign(new Error('value too long'), { code: '22001' });
      const { queue, offers } = failingQueue(1, rejected);
      const worker = await workerWith(queue, executor);
      worker.wake();
      await jest.advanceTimersByTimeAsync(5000);
      expect(offers()).toBe(1);
      expect(queue.completed).toEqual([]);
      expect(worker.runningJobIds).toEqual([]);
    });
  });
});
