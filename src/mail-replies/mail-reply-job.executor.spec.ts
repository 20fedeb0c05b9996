import { Test } from '@nestjs/testing';
import { startSmtpRecorder, SmtpRecorder } from '../../test/support/smtp-recorder';
import { CallbackRetryPolicy } from '../callbacks/callback-retry.policy';
import { CatalogService } from '../catalog/catalog.service';
import { loadConfig } from '../config/app-config';
import { configProviders } from '../config/config.module';
import { MailReplyJobsRepository } from '../queue/mail-reply-jobs.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { QueueRepository } from '../queue/queue.repository';
import { ClaimedJob, JOB_EXECUTOR, JobExecutor, JobKind } from '../queue/queue.types';
import { NodeIdentity } from '../storage/node-identity';
import { WorkerService } from '../worker/worker.service';
import { inProcessEvents } from '../../test/support/in-process-events';
import { ResultRepository } from '../results/result.repository';
import { MAIL_REPLY_SLOTS, MailReplyJobExecutor } from './mail-reply-job.executor';

const REPLY_JOB_ID = '7d1f2c3b-4a5e-4f60-8b7c-9d0e1f2a3b4c';
const JOB_ID = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const ADMIN = 'admin@example.com';

/** What the executor recorded through the queue's mail-reply statements. */
interface Recorded {
  ended: Array<{ jobId: string; owner: string; outcome: unknown }>;
  retried: Array<{ jobId: string; owner: string; error: string; retryAt: Date }>;
}

/** A claimed mail-reply job of a refused message, its first attempt `firstAttemptAt`. */
function refusal(attempts: number, firstAttemptAt: Date): ClaimedJob {
  return {
    id: REPLY_JOB_ID,
    applicationName: 'demo',
    kind: JobKind.MAIL_REPLY,
    meta: {},
    submittedAt: firstAttemptAt,
    attempts: attempts + 1,
    source: 'mail_reply',
    hasCallback: false,
    files: [],
    trace: null,
    mailReply: {
      source: 'box',
      sourceKey: '1:42',
      applicationName: 'demo',
      jobId: JOB_ID,
      rejection: 'the message has no attachment',
      replyTo: 'analyst@example.com',
      cc: null,
      subject: 'RE: Numbers',
      from: 'svc@example.com',
      inReplyTo: '<m1@example.com>',
      attachMaxBytes: 1000,
      attempts,
      firstAttemptAt,
    },
  };
}

describe('MailReplyJobExecutor', () => {
  let smtp: SmtpRecorder;
  beforeAll(async () => {
    smtp = await startSmtpRecorder();
  });
  afterAll(() => smtp.stop());
  beforeEach(() => {
    smtp.received.length = 0;
    smtp.refusing = false;
  });

  async function executorWith(
    env: NodeJS.ProcessEnv,
  ): Promise<{ executor: MailReplyJobExecutor; recorded: Recorded }> {
    const recorded: Recorded = { ended: [], retried: [] };
    const replyJobs = {
      end: (jobId: string, owner: string, outcome: unknown) => {
        recorded.ended.push({ jobId, owner, outcome });
        return Promise.resolve(true);
      },
      retry: (jobId: string, owner: string, error: string, retryAt: Date) => {
        recorded.retried.push({ jobId, owner, error, retryAt });
        return Promise.resolve(true);
      },
    };
    const module = await Test.createTestingModule({
      providers: [
        MailReplyJobExecutor,
        CallbackRetryPolicy,
        ...configProviders(loadConfig(env)),
        { provide: MailReplyJobsRepository, useValue: replyJobs },
        // A refusal's reply reads no result, and the account has no template.
        { provide: ResultRepository, useValue: {} },
        { provide: CatalogService, useValue: {} },
      ],
    }).compile();
    const executor = module.get(MailReplyJobExecutor);
    return { executor, recorded };
  }

  function smtpEnv(): NodeJS.ProcessEnv {
    return {
      SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
      ADMIN_EMAIL: ADMIN,
      CALLBACK_FIRST_RETRY_MS: '1000',
      CALLBACK_MAX_RETRY_DELAY_SECONDS: '60',
      CALLBACK_RETRY_SECONDS: '600',
    };
  }

  it('has no slots without SMTP_URL, and its slots with it', async () => {
    expect((await executorWith({})).executor.capacity).toBe(0);
    const { executor } = await executorWith(smtpEnv());
    expect(executor.capacity).toBe(MAIL_REPLY_SLOTS);
    executor.onModuleDestroy();
  });

  it('sends the reply and ends its job as sent, under the lease of its owner', async () => {
    const { executor, recorded } = await executorWith(smtpEnv());
    const retryAt = await executor.deliver(
      refusal(0, new Date()),
      'node-a',
      new AbortController().signal,
    );
    executor.onModuleDestroy();
    expect(retryAt).toBeNull();
    expect(recorded.ended).toEqual([
      { jobId: REPLY_JOB_ID, owner: 'node-a', outcome: { sent: true } },
    ]);
    expect(recorded.retried).toEqual([]);
    const [reply] = smtp.received;
    expect(reply.envelopeTo).toEqual(['analyst@example.com']);
    expect(reply.mail.subject).toBe('RE: Numbers');
    expect(reply.mail.inReplyTo).toBe('<m1@example.com>');
    expect(reply.mail.text).toMatch(/the message has no attachment/);
  });

  it('queues a refused attempt again at the back-off, counted from the first attempt', async () => {
    smtp.refusing = true;
    const { executor, recorded } = await executorWith(smtpEnv());
    const before = Date.now();
    const retryAt = await executor.deliver(
      refusal(2, new Date()),
      'node-a',
      new AbortController().signal,
    );
    executor.onModuleDestroy();
    // The third attempt failed: its wait is drawn between 2 s and 4 s.
    expect(retryAt).not.toBeNull();
    const wait = retryAt!.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(2000);
    expect(wait).toBeLessThanOrEqual(4000 + (Date.now() - before));
    expect(recorded.retried).toEqual([
      { jobId: REPLY_JOB_ID, owner: 'node-a', error: expect.stringMatching(/451/), retryAt },
    ]);
    expect(recorded.ended).toEqual([]);
    expect(smtp.received).toEqual([]);
  });

  it('gives a reply up past the retry period, its dead letter, and tells ADMIN_EMAIL', async () => {
    smtp.refusedRecipients.add('analyst@example.com');
    try {
      const { executor, recorded } = await executorWith(smtpEnv());
      const firstAttemptAt = new Date(Date.now() - 600_000);
      const retryAt = await executor.deliver(
        refusal(5, firstAttemptAt),
        'node-a',
        new AbortController().signal,
      );
      executor.onModuleDestroy();
      expect(retryAt).toBeNull();
      expect(recorded.retried).toEqual([]);
      expect(recorded.ended).toEqual([
        {
          jobId: REPLY_JOB_ID,
          owner: 'node-a',
          outcome: { sent: false, error: expect.stringMatching(/550/) },
        },
      ]);
      const [notice] = smtp.received;
      expect(notice.envelopeTo).toEqual([ADMIN]);
      expect(notice.mail.text).toMatch(/could not be sent after 6 attempt\(s\)/);
    } finally {
      smtp.refusedRecipients.clear();
    }
  });

  it('records nothing for an attempt the node cut short (it hands the job back)', async () => {
    smtp.refusing = true;
    const { executor, recorded } = await executorWith(smtpEnv());
    const stopping = new AbortController();
    stopping.abort();
    expect(await executor.deliver(refusal(0, new Date()), 'node-a', stopping.signal)).toBeNull();
    executor.onModuleDestroy();
    expect(recorded).toEqual({ ended: [], retried: [] });
  });

  describe('in the worker', () => {
    /** The queue's other statements: no R job, nothing expired. */
    const queue = {
      claim: () => Promise.resolve([]),
      heartbeat: () => Promise.resolve([]),
      release: (_owner: string, ids: string[]) => Promise.resolve(ids.length),
      recoverExpiredLeases: () => Promise.resolve({ requeued: 0, exhausted: [] }),
      deleteExpiredResults: () => Promise.resolve(0),
      deleteExpiredUsage: () => Promise.resolve(0),
    };
    const noR: JobExecutor = {
      execute: () => Promise.reject(new Error('no R job runs in these tests')),
    };

    /** A worker with the real executor; its mail-reply claims hand out `waiting` once. */
    async function workerWith(env: NodeJS.ProcessEnv, waiting: ClaimedJob[]) {
      const claims: number[] = [];
      const ended: unknown[] = [];
      const replyJobs = {
        claim: (_owner: string, limit: number) => {
          claims.push(limit);
          return Promise.resolve(waiting.splice(0, limit));
        },
        end: (_jobId: string, _owner: string, outcome: unknown) => {
          ended.push(outcome);
          return Promise.resolve(true);
        },
        retry: () => Promise.resolve(true),
      };
      const notifier = new QueueNotifier(inProcessEvents());
      const module = await Test.createTestingModule({
        providers: [
          // No polling during the test: only a wake-up makes the worker claim.
          ...configProviders(loadConfig({ POLL_INTERVAL_MS: '3600000', ...env })),
          { provide: QueueRepository, useValue: queue },
          { provide: MailReplyJobsRepository, useValue: replyJobs },
          { provide: QueueNotifier, useValue: notifier },
          { provide: JOB_EXECUTOR, useValue: noR },
          { provide: ResultRepository, useValue: {} },
          { provide: CatalogService, useValue: {} },
          NodeIdentity,
          CallbackRetryPolicy,
          MailReplyJobExecutor,
          WorkerService,
        ],
      }).compile();
      return { worker: module.get(WorkerService), notifier, claims, ended, module };
    }

    async function until(done: () => boolean, what: string): Promise<void> {
      for (let i = 0; i < 200 && !done(); i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      if (!done()) {
        throw new Error(`timed out waiting for ${what}`);
      }
    }

    it('claims mail-reply jobs into slots of their own when one is queued, and sends them', async () => {
      const { worker, notifier, claims, ended, module } = await workerWith(smtpEnv(), [
        refusal(0, new Date()),
      ]);
      await worker.onApplicationBootstrap();
      await until(() => claims.length > 0, 'the first claim');
      notifier.jobQueued(JobKind.MAIL_REPLY);
      await until(() => ended.length === 1, 'the reply sent');
      expect(ended).toEqual([{ sent: true }]);
      expect(claims[0]).toBe(MAIL_REPLY_SLOTS);
      expect(smtp.received.map((r) => r.mail.subject)).toEqual(['RE: Numbers']);
      await worker.onApplicationShutdown();
      await module.close();
    });

    it('has no mail-reply slots on a node without SMTP_URL: it never claims one', async () => {
      const { worker, notifier, claims, module } = await workerWith({}, [refusal(0, new Date())]);
      await worker.onApplicationBootstrap();
      notifier.jobQueued(JobKind.MAIL_REPLY);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(claims).toEqual([]);
      await worker.onApplicationShutdown();
      await module.close();
    });
  });
});
