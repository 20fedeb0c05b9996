import { createServer, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Test } from '@nestjs/testing';
import { loadConfig } from '../config/app-config';
import { configProviders } from '../config/config.module';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { CallbackJobsRepository } from '../queue/callback-jobs.repository';
import { QueueRepository } from '../queue/queue.repository';
import { ClaimedJob, JOB_EXECUTOR, JobExecutor, JobKind } from '../queue/queue.types';
import { NodeIdentity } from '../storage/node-identity';
import { WorkerService } from '../worker/worker.service';
import { inProcessEvents } from '../../test/support/in-process-events';
import { callbackSignature, CallbackJobExecutor } from './callback-job.executor';
import { CallbackRetryPolicy } from './callback-retry.policy';
import { CallbackUrlPolicy } from './callback-url.policy';
import { HostLookup } from './host-lookup';
import { CallbackState } from './job-callback.entity';

const SECRET = 'a-secret-of-sixteen-or-more';
const JOB_ID = '0b5e2c1e-8d0c-4a57-9f3e-2f4c3a1b9d77';
const CALLBACK_JOB_ID = '5f0c8a2d-3b1e-4c6f-8a9d-7e2b1c0d4f55';

/** The R executor: no R job is queued, so it is never called. */
const noR: JobExecutor = {
  execute: () => Promise.reject(new Error('no R job runs in these tests')),
};

/**
 * In-memory stand-in for the queue's callback statements: one callback job, and the fake-clock
 * time of every claim. The worker's R slots find nothing.
 */
class CallbackRows {
  state: CallbackState = CallbackState.PENDING;
  attempts = 0;
  nextAttemptAt: number;
  readonly claimedAt: number[] = [];
  lastHttpStatus: number | null = null;
  private leased = false;

  constructor(
    private readonly url: string,
    private readonly endedAt: Date,
  ) {
    this.nextAttemptAt = endedAt.getTime();
  }

  claim(): Promise<ClaimedJob[]> {
    return Promise.resolve([]);
  }

  claimCallbacks(_owner: string, _limit: number, leaseSeconds: number): Promise<ClaimedJob[]> {
    if (this.state !== CallbackState.PENDING || this.leased || this.nextAttemptAt > Date.now()) {
      return Promise.resolve([]);
    }
    this.claimedAt.push(Date.now());
    this.leased = true;
    this.nextAttemptAt = Date.now() + leaseSeconds * 1000;
    return Promise.resolve([
      {
        id: CALLBACK_JOB_ID,
        applicationName: 'demo',
        kind: JobKind.CALLBACK,
        meta: {},
        submittedAt: this.endedAt,
        attempts: this.claimedAt.length,
        source: 'callback',
        hasCallback: false,
        files: [],
        trace: null,
        callback: {
          jobId: JOB_ID,
          url: this.url,
          attempts: this.attempts,
          createdAt: this.endedAt,
          linksBase: 'http://svc.example.com',
          result: {
            jobId: JOB_ID,
            applicationName: 'demo',
            resultTime: this.endedAt,
            success: true,
            type: 'zip',
          },
        },
      },
    ]);
  }

  endCallback(
    _jobId: string,
    _owner: string,
    outcome: { delivered: boolean; httpStatus: number | null },
  ): Promise<boolean> {
    this.leased = false;
    this.state = outcome.delivered ? CallbackState.DELIVERED : CallbackState.FAILED;
    this.attempts++;
    this.lastHttpStatus = outcome.httpStatus;
    return Promise.resolve(true);
  }

  retryCallback(
    _jobId: string,
    _owner: string,
    failure: { httpStatus: number | null },
    retryAt: Date,
  ): Promise<boolean> {
    this.leased = false;
    this.attempts++;
    this.lastHttpStatus = failure.httpStatus;
    this.nextAttemptAt = retryAt.getTime();
    return Promise.resolve(true);
  }

  /** The callback jobs' statements (CallbackJobsRepository) on these rows. */
  readonly callbackJobs = {
    claim: (owner: string, limit: number, leaseSeconds: number) =>
      this.claimCallbacks(owner, limit, leaseSeconds),
    retry: (jobId: string, owner: string, failure: { httpStatus: number | null }, retryAt: Date) =>
      this.retryCallback(jobId, owner, failure, retryAt),
    end: (
      jobId: string,
      owner: string,
      outcome: { delivered: boolean; httpStatus: number | null },
    ) => this.endCallback(jobId, owner, outcome),
  };

  released = 0;

  release(): Promise<number> {
    this.released++;
    this.leased = false;
    this.nextAttemptAt = Date.now();
    return Promise.resolve(1);
  }

  heartbeat(_owner: string, ids: string[]): Promise<string[]> {
    return Promise.resolve(ids);
  }

  recoverExpiredLeases(): Promise<{ requeued: number; exhausted: [] }> {
    return Promise.resolve({ requeued: 0, exhausted: [] });
  }

  deleteExpiredResults(): Promise<number> {
    return Promise.resolve(0);
  }

  deleteExpiredUsage(): Promise<number> {
    return Promise.resolve(0);
  }
}

/** Lets real I/O (the HTTP round trip) happen while the clock stands still; fails after 10 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = process.hrtime.bigint() + 10_000_000_000n;
  while (!condition()) {
    if (process.hrtime.bigint() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('callback jobs: CallbackJobExecutor in the worker, back-off', () => {
  let receiver: Server;
  let statuses: number[];
  const held: ServerResponse[] = [];
  let bodies: Array<{ signature: string; body: Buffer }>;
  let url: string;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        bodies.push({
          signature: String(req.headers['x-svc-signature']),
          body: Buffer.concat(chunks),
        });
        const status = statuses.shift() ?? 200;
        // 0: no answer until the test ends it.
        if (status === 0) {
          held.push(res);
          return;
        }
        res.statusCode = status;
        res.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  });

  beforeEach(() => {
    bodies = [];
    // The clock and timers are fake; I/O and setImmediate stay real, so requests still travel.
    jest.useFakeTimers({
      now: new Date('2026-01-01T00:00:00Z'),
      doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'],
    });
  });
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  /** The worker as Nest builds it, with the real callback executor, on `rows`. */
  async function serviceFor(rows: CallbackRows, env: Record<string, string>) {
    const module = await Test.createTestingModule({
      providers: [
        ...configProviders(
          loadConfig({
            // No polling during the test: only the worker's own retry timers wake it.
            POLL_INTERVAL_MS: '3600000',
            APPLICATION_SETTINGS: JSON.stringify({
              demo: { callbackHosts: ['127.0.0.1'], callbackSecret: SECRET },
            }),
            ...env,
          }),
        ),
        { provide: QueueRepository, useValue: rows },
        { provide: CallbackJobsRepository, useValue: rows.callbackJobs },
        // The real notifier: on the embedded database it only reports within the process.
        {
          provide: QueueNotifier,
          useValue: new QueueNotifier(inProcessEvents()),
        },
        { provide: JOB_EXECUTOR, useValue: noR },
        NodeIdentity,
        CallbackRetryPolicy,
        CallbackUrlPolicy,
        HostLookup,
        CallbackJobExecutor,
        WorkerService,
      ],
    }).compile();
    return module.get(WorkerService);
  }

  // The jitter's draw at its bounds: all of the doubled delay, then half of it.
  it.each([
    { draw: 1, first: 1000, second: 2000 },
    { draw: 0, first: 500, second: 1000 },
  ])(
    'with the draw $draw: tries again after $first ms, then $second ms, and not before; the third answer, 200, delivers it',
    async ({ draw, first, second }) => {
      jest.spyOn(Math, 'random').mockReturnValue(draw);
      statuses = [500, 500];
      const endedAt = new Date();
      const rows = new CallbackRows(url, endedAt);
      const service = await serviceFor(rows, { CALLBACK_FIRST_RETRY_MS: '1000' });
      await service.onApplicationBootstrap();
      await until(() => rows.attempts === 1, 'the first attempt');

      // The clock stands still while a request travels, so each failure is recorded at the time
      // of its claim: the timers fire exactly at the delay (plus their 5 ms margin).
      await jest.advanceTimersByTimeAsync(first + 4);
      expect(rows.claimedAt).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(1);
      await until(() => rows.attempts === 2, 'the second attempt');

      await jest.advanceTimersByTimeAsync(second + 4);
      expect(rows.claimedAt).toHaveLength(2);
      await jest.advanceTimersByTimeAsync(1);
      await until(() => rows.attempts === 3, 'the third attempt');

      expect(rows.state).toBe(CallbackState.DELIVERED);
      expect(rows.lastHttpStatus).toBe(200);
      // Each retry waits its delay (plus the timer's 5 ms margin) after the previous attempt.
      const t0 = endedAt.getTime();
      expect(rows.claimedAt.map((at) => at - t0)).toEqual([0, first + 5, first + second + 10]);
      // Every attempt sends the same body with a signature that matches it.
      expect(bodies).toHaveLength(3);
      for (const { signature, body } of bodies) {
        expect(signature).toBe(callbackSignature(SECRET, body));
        expect(body.equals(bodies[0].body)).toBe(true);
      }
      await service.onApplicationShutdown();
    },
  );

  it('a shutdown cuts a running attempt short and hands the callback job back, the attempt not counted', async () => {
    statuses = [0];
    const rows = new CallbackRows(url, new Date());
    const service = await serviceFor(rows, { SHUTDOWN_GRACE_SECONDS: '1' });
    await service.onApplicationBootstrap();
    await until(() => bodies.length === 1, 'the attempt to reach the receiver');
    const stopped = service.onApplicationShutdown();
    // The grace period passes with the receiver still silent.
    await jest.advanceTimersByTimeAsync(1000);
    await stopped;
    expect(rows.released).toBe(1);
    expect(rows.attempts).toBe(0);
    expect(rows.state).toBe(CallbackState.PENDING);
    expect(rows.claimedAt).toHaveLength(1);
    for (const res of held.splice(0)) {
      res.end();
    }
  });

  it('gives up once the next attempt would fall past CALLBACK_RETRY_SECONDS', async () => {
    // The longest draw: the whole doubled delay.
    jest.spyOn(Math, 'random').mockReturnValue(1);
    statuses = [503, 503, 503, 503, 503];
    const rows = new CallbackRows(url, new Date());
    const service = await serviceFor(rows, {
      CALLBACK_FIRST_RETRY_MS: '1000',
      CALLBACK_RETRY_SECONDS: '3',
    });
    await service.onApplicationBootstrap();
    await until(() => rows.attempts === 1, 'the first attempt');
    await jest.advanceTimersByTimeAsync(1005);
    await until(() => rows.attempts === 2, 'the second attempt');
    // The next would be 2 s later, at 3.005 s: past the 3 s period, so this was the last.
    expect(rows.state).toBe(CallbackState.FAILED);
    expect(rows.lastHttpStatus).toBe(503);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(rows.claimedAt).toHaveLength(2);
    await service.onApplicationShutdown();
  });
});
