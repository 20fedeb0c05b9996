import { Test } from '@nestjs/testing';
import { AUDIT_ACTIONS } from '../audit/audit.service';
import { ApplicationsDirectory } from '../admin/applications-directory.service';
import { QueueConfig, SecurityConfig } from '../config/config-slices';
import { JobCancellationService } from '../jobs/job-cancellation.service';
import { AdminJobRow, JobAdminRepository } from '../queue/job-admin.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { WorkerNodesRepository } from '../queue/worker-nodes.repository';
import { AccessPolicyService } from '../security/access-policy.service';
import { makePrincipal } from '../security/principal';
import { apiErrorOf, BASE } from '../../test/support/controller-testing';
import { SubmissionLimits } from '../jobs/submission-limits';
import { auditedFilter, ConsoleService } from './console.service';
import { RequestedJobs } from './job-filter';
import { JobEventsService } from './job-events.service';

const ROOT = makePrincipal('user', 'root', [], true);
const ALICE = makePrincipal('user', 'alice', []);
const JOB_ID = '5b1e0c52-7d3e-4b8a-9c21-0e5f4d3b2a10';
const EVERYTHING: RequestedJobs = {
  application: null,
  states: [],
  kind: null,
  source: null,
  principal: null,
  from: null,
  to: null,
  idRange: null,
};

function row(id: string, overrides: Partial<AdminJobRow> = {}): AdminJobRow {
  return {
    id,
    application_name: 'demo',
    kind: 'script',
    source: 'rest',
    state: 'DONE',
    priority: 0,
    submitted_at: new Date('2026-11-02T10:00:00Z'),
    started_at: new Date('2026-11-02T10:00:01Z'),
    finished_at: new Date('2026-11-02T10:00:02Z'),
    submitted_by: 'user:bob',
    function_name: null,
    attempts: 1,
    lost_runs: 0,
    last_error: null,
    cancelled_by: null,
    cancelled_at: null,
    meta: {},
    progress_fraction: null,
    progress_message: null,
    success: false,
    result_type: 'txt',
    position_at: '2026-11-02T10:00:00.000000Z',
    ...overrides,
  };
}

describe('ConsoleService', () => {
  let jobs: Record<string, jest.Mock>;
  let workers: Record<string, jest.Mock>;
  let cancellation: Record<string, jest.Mock>;
  let notifier: Record<string, jest.Mock>;
  let events: Record<string, jest.Mock>;
  let service: ConsoleService;
  let maxQueued: Record<string, number>;

  beforeEach(async () => {
    maxQueued = {};
    jobs = {
      list: jest.fn().mockResolvedValue([]),
      count: jest.fn().mockResolvedValue({ total: 0, capped: false }),
      findOne: jest.fn().mockResolvedValue(row(JOB_ID)),
      inputFiles: jest.fn().mockResolvedValue({ files: [], total: 0 }),
      retry: jest.fn().mockResolvedValue({ outcome: 'retried', repliesQueued: false }),
      matching: jest.fn().mockResolvedValue([]),
      overviewApplications: jest.fn().mockResolvedValue([]),
      overviewSeries: jest.fn().mockResolvedValue([]),
    };
    workers = { list: jest.fn().mockResolvedValue({ nodes: [], now: new Date() }) };
    cancellation = { cancel: jest.fn().mockResolvedValue('stopped') };
    notifier = { jobQueued: jest.fn() };
    events = { changed: jest.fn() };
    const security = {
      authMode: 'basic',
      adminUser: 'root',
      globalAdmins: {},
      applicationSecurity: { demo: { adminPrincipals: ['alice'] }, other: {} },
    } as unknown as SecurityConfig;
    const module = await Test.createTestingModule({
      providers: [
        ConsoleService,
        AccessPolicyService,
        { provide: SecurityConfig, useValue: security },
        { provide: QueueConfig, useValue: { heartbeatSeconds: 5 } },
        {
          provide: ApplicationsDirectory,
          useValue: {
            list: jest.fn().mockResolvedValue([{ application: 'demo' }, { application: 'other' }]),
            namedOrCatalogued: jest.fn().mockResolvedValue(['other']),
          },
        },
        { provide: JobAdminRepository, useValue: jobs },
        { provide: WorkerNodesRepository, useValue: workers },
        { provide: JobCancellationService, useValue: cancellation },
        { provide: QueueNotifier, useValue: notifier },
        { provide: JobEventsService, useValue: events },
        {
          provide: SubmissionLimits,
          useValue: { maxQueuedOf: (app: string) => maxQueued[app] ?? null },
        },
      ],
    }).compile();
    service = module.get(ConsoleService);
  });

  it('tells a global admin every known application, an application admin theirs', async () => {
    expect(await service.caller(ROOT)).toEqual({
      principal: 'user:root',
      globalAdmin: true,
      applications: ['demo', 'other'],
      apiKeysAccepted: false,
      auditActions: [...AUDIT_ACTIONS],
    });
    expect(await service.caller(ALICE)).toEqual({
      principal: 'user:alice',
      globalAdmin: false,
      applications: ['demo'],
      apiKeysAccepted: false,
      auditActions: [],
    });
  });

  it('cancels one job in the name of the console caller; 404 for another application, 409 once done', async () => {
    jobs.findOne.mockResolvedValue(row(JOB_ID, { state: 'RUNNING' }));
    cancellation.cancel.mockResolvedValue('stopping');
    await service.cancelOne(ALICE, 'demo', JOB_ID, BASE);
    expect(cancellation.cancel).toHaveBeenCalledWith('demo', JOB_ID, 'user:alice');
    expect(await apiErrorOf(() => service.cancelOne(ALICE, 'other', JOB_ID, BASE))).toMatchObject({
      status: 404,
    });
    expect(cancellation.cancel).toHaveBeenCalledTimes(1);
    cancellation.cancel.mockResolvedValue('finished');
    expect(await apiErrorOf(() => service.cancelOne(ROOT, 'demo', JOB_ID, BASE))).toMatchObject({
      status: 409,
    });
  });

  it("narrows a list to the caller's applications, and refuses another's by name", async () => {
    await service.list(ALICE, EVERYTHING, 10, null, BASE);
    expect(jobs.list).toHaveBeenCalledWith(
      { ...EVERYTHING, application: undefined, applications: ['demo'] },
      11,
      null,
    );
    await service.list(ROOT, EVERYTHING, 10, null, BASE);
    expect(jobs.list.mock.calls[1][0]).toMatchObject({ applications: null });
    const error = await apiErrorOf(() =>
      service.list(ALICE, { ...EVERYTHING, application: 'other' }, 10, null, BASE),
    );
    expect(error).toEqual({
      status: 403,
      message: 'user:alice is not an admin of application other.',
    });
    expect(jobs.list).toHaveBeenCalledTimes(2);
  });

  it('gives the next cursor only when the repository found one job more than the page', async () => {
    const ids = ['a', 'b', 'c'].map((c) => JOB_ID.replace(/^./, c));
    jobs.list.mockResolvedValue(ids.map((id) => row(id)));
    const page = await service.list(ROOT, EVERYTHING, 2, null, BASE);
    expect(page.jobs.map((job) => job.jobId)).toEqual(ids.slice(0, 2));
    expect(Buffer.from(page.next!, 'base64url').toString()).toBe(
      `2026-11-02T10:00:00.000000Z|${ids[1]}`,
    );
    jobs.list.mockResolvedValue(ids.slice(0, 2).map((id) => row(id)));
    expect((await service.list(ROOT, EVERYTHING, 2, null, BASE)).next).toBeNull();
  });

  it('shows a job with its outcome and links; 404 for one the caller may not see', async () => {
    expect(await service.job(ALICE, 'demo', JOB_ID, BASE)).toMatchObject({
      outcome: 'failed',
      submittedBy: 'user:bob',
      links: {
        result: `${BASE}/svc/api/rest/result/demo/${JOB_ID}.txt`,
        console: `${BASE}/svc/console/#/jobs/demo/${JOB_ID}`,
      },
    });
    expect(await apiErrorOf(() => service.job(ALICE, 'other', JOB_ID, BASE))).toEqual({
      status: 404,
      message: `Application other has no job ${JOB_ID}.`,
    });
    expect(jobs.findOne).toHaveBeenCalledTimes(1);
  });

  it('shows a job with its input files and their downloads; 404 for a file it does not have', async () => {
    jobs.inputFiles.mockResolvedValue({
      files: [{ id: '42', name: 'data.csv', size: 12 }],
      total: 3,
    });
    expect((await service.job(ALICE, 'demo', JOB_ID, BASE)).inputFiles).toEqual({
      total: 3,
      files: [
        {
          name: 'data.csv',
          size: 12,
          uri: `${BASE}/svc/api/rest/admin/jobs/demo/${JOB_ID}/files/42`,
        },
      ],
    });
    expect(jobs.inputFiles).toHaveBeenCalledWith(JOB_ID, 200);
    jobs.inputFile = jest.fn().mockResolvedValue(null);
    expect((await apiErrorOf(() => service.inputFile(ALICE, 'demo', JOB_ID, '7'))).status).toBe(
      404,
    );
    // Another application's job: not even asked for its file.
    expect((await apiErrorOf(() => service.inputFile(ALICE, 'other', JOB_ID, '7'))).status).toBe(
      404,
    );
    expect(jobs.inputFile).toHaveBeenCalledTimes(1);
  });

  it('retries a failed job and wakes the workers and the event streams', async () => {
    await service.retry(ALICE, 'demo', JOB_ID, BASE);
    expect(jobs.retry).toHaveBeenCalledWith('demo', JOB_ID, null, null);
    expect(notifier.jobQueued.mock.calls).toEqual([['script']]);
    expect(events.changed).toHaveBeenCalledWith('demo');
  });

  it('wakes the mail-reply workers too when the retry owes an e-mail reply again', async () => {
    jobs.retry.mockResolvedValue({ outcome: 'retried', repliesQueued: true });
    await service.retry(ALICE, 'demo', JOB_ID, BASE);
    expect(notifier.jobQueued.mock.calls).toEqual([['script'], ['mail_reply']]);
  });

  it.each([
    ['queued', 'is QUEUED: only a failed job can be retried.'],
    ['running', 'is RUNNING: only a failed job can be retried.'],
    ['succeeded', 'succeeded: only a failed job can be retried.'],
    ['cancelled', 'was cancelled: only a failed job can be retried'],
    ['no-inputs', 'failed before its input files were kept for a retry'],
  ])('answers 409 to a retry of a job that is %s', async (reason, message) => {
    jobs.retry.mockResolvedValue({ outcome: 'refused', reason });
    const error = await apiErrorOf(() => service.retry(ROOT, 'demo', JOB_ID, BASE));
    expect(error.status).toBe(409);
    expect(error.message).toContain(message);
    expect(notifier.jobQueued).not.toHaveBeenCalled();
  });

  it('cancels up to the limit one by one, as the caller, and says whether more matched', async () => {
    const ids = ['a', 'b', 'c'].map((c) => JOB_ID.replace(/^./, c));
    jobs.matching.mockResolvedValue(ids.map((id) => ({ id, application_name: 'demo' })));
    cancellation.cancel
      .mockResolvedValueOnce('stopped')
      .mockResolvedValueOnce('finished')
      .mockResolvedValueOnce('stopping');
    expect(await service.cancel(ALICE, EVERYTHING, 2)).toEqual({
      cancelled: 1,
      jobIds: [ids[0]],
      more: true,
    });
    expect(jobs.matching).toHaveBeenCalledWith(
      expect.objectContaining({ applications: ['demo'], states: ['QUEUED', 'RUNNING'] }),
      3,
    );
    expect(cancellation.cancel).toHaveBeenCalledWith('demo', ids[0], 'user:alice');
    expect(cancellation.cancel).toHaveBeenCalledTimes(2);
  });

  it('answers 429 to a retry of a failed job whose application has maxQueuedJobs queued', async () => {
    maxQueued.demo = 2;
    jobs.retry.mockResolvedValue({ outcome: 'queue-full', queued: 2 });
    const error = await apiErrorOf(() => service.retry(ALICE, 'demo', JOB_ID, BASE));
    expect(error).toEqual({
      status: 429,
      message:
        'The application "demo" has 2 jobs queued, its limit (maxQueuedJobs: 2): retry once some have started.',
    });
    expect(jobs.retry).toHaveBeenCalledWith('demo', JOB_ID, null, 2);
    expect(notifier.jobQueued).not.toHaveBeenCalled();
  });

  it('retries the failed jobs a filter matches within each application’s maxQueuedJobs', async () => {
    maxQueued.demo = 1;
    const ids = ['a', 'b', 'c', 'd', 'e'].map((c) => JOB_ID.replace(/^./, c));
    const apps = ['demo', 'other', 'demo', 'demo', 'other'];
    jobs.matching.mockResolvedValue(
      ids.map((id, i) => ({ id, application_name: apps[i], kind: 'script' })),
    );
    jobs.retry
      .mockResolvedValueOnce({ outcome: 'retried', repliesQueued: false })
      .mockResolvedValueOnce({ outcome: 'refused', reason: 'no-inputs' })
      .mockResolvedValueOnce({ outcome: 'queue-full', queued: 1 });
    const fields = { application: 'demo', from: '2026-11-01T00:00:00Z' };
    expect(await service.retryFailed(ROOT, EVERYTHING, 4, fields)).toEqual({
      retried: 1,
      jobIds: [ids[0]],
      queueFull: [{ application: 'demo', maxQueuedJobs: 1, skipped: 2 }],
      notRetryable: 1,
      more: true,
    });
    // The fourth job, of the full application, is skipped without a statement.
    expect(jobs.retry).toHaveBeenCalledTimes(3);
    expect(jobs.matching).toHaveBeenCalledWith(expect.objectContaining({ states: ['FAILED'] }), 5);
    expect(notifier.jobQueued.mock.calls).toEqual([['script']]);
    expect(events.changed.mock.calls).toEqual([['demo']]);
  });

  it('records a bulk retry’s filter with its times named apart from e-mail fields', () => {
    // The audit trail pseudonymises fields named from and to (e-mail addresses).
    expect(auditedFilter({ application: 'demo', from: 'a', to: 'b' })).toEqual({
      application: 'demo',
      submittedFrom: 'a',
      submittedTo: 'b',
    });
    expect(auditedFilter({ kind: 'script' })).toEqual({ kind: 'script' });
  });

  it('counts the failed jobs a bulk retry would take, narrowed to the caller’s applications', async () => {
    jobs.count.mockResolvedValue({ total: 7, capped: false });
    expect(await service.countFailed(ALICE, EVERYTHING)).toEqual({ failed: 7, capped: false });
    expect(jobs.count).toHaveBeenCalledWith(
      expect.objectContaining({ applications: ['demo'], states: ['FAILED'] }),
      10000,
    );
  });

  it('fills the overview: every visible application, rounded series, stale workers', async () => {
    jobs.overviewApplications.mockResolvedValue([
      {
        application_name: 'demo',
        queued: 2,
        running: 1,
        succeeded_last_hour: 3,
        failed_last_hour: 4,
      },
    ]);
    jobs.overviewSeries.mockResolvedValue([
      {
        at: new Date('2026-11-02T10:00:00Z'),
        started: 1,
        finished: 2,
        succeeded: 1,
        failed: 1,
        wait_p50: 10.4,
        wait_p95: 20.6,
        run_p50: null,
        run_p95: null,
        queue_depth: 3,
      },
    ]);
    const now = new Date('2026-11-02T10:00:30Z');
    workers.list.mockResolvedValue({
      now,
      nodes: [
        {
          nodeId: 'a',
          role: 'worker',
          rEngine: 'native',
          slots: 4,
          busy: 1,
          heartbeatAt: new Date('2026-11-02T10:00:25Z'),
          version: '1.4.0',
          startedAt: new Date('2026-11-02T09:00:00Z'),
          memoryBytes: 150000000,
          runningJobs: [
            { applicationName: 'demo', jobId: JOB_ID, startedAt: new Date('2026-11-02T10:00:20Z') },
          ],
        },
        {
          nodeId: 'b',
          role: 'all',
          rEngine: 'webr',
          slots: 1,
          busy: 1,
          heartbeatAt: new Date('2026-11-02T10:00:14Z'),
          version: null,
          startedAt: null,
          memoryBytes: null,
          runningJobs: [],
        },
      ],
    });
    const overview = await service.overview(ROOT);
    expect(overview.applications).toEqual([
      { application: 'demo', queued: 2, running: 1, succeededLastHour: 3, failedLastHour: 4 },
      { application: 'other', queued: 0, running: 0, succeededLastHour: 0, failedLastHour: 0 },
    ]);
    expect(jobs.overviewSeries).toHaveBeenCalledWith(null, 60, 60);
    expect(jobs.overviewSeries).toHaveBeenCalledWith(null, 900, 96);
    expect(overview.series.hour).toEqual({
      bucketSeconds: 60,
      buckets: [
        {
          at: '2026-11-02T10:00:00.000Z',
          waitP50Ms: 10,
          waitP95Ms: 21,
          runP50Ms: null,
          runP95Ms: null,
          started: 1,
          finished: 2,
          succeeded: 1,
          failed: 1,
          queueDepth: 3,
        },
      ],
    });
    // Stale after three heartbeats (3 x 5 s) missed, on the database's clock.
    expect(overview.workers.map((w) => [w.node, w.free, w.stale])).toEqual([
      ['a', 3, false],
      ['b', 0, true],
    ]);
    expect(overview.workers[0]).toMatchObject({
      version: '1.4.0',
      startedAt: '2026-11-02T09:00:00.000Z',
      memoryBytes: 150000000,
      runningJobs: [
        { applicationName: 'demo', jobId: JOB_ID, startedAt: '2026-11-02T10:00:20.000Z' },
      ],
    });
    expect(workers.list).toHaveBeenLastCalledWith(null);
    await service.overview(ALICE);
    expect(jobs.overviewApplications).toHaveBeenLastCalledWith(['demo']);
    // An application admin is told only their applications' running jobs.
    expect(workers.list).toHaveBeenLastCalledWith(['demo']);
  });
});
