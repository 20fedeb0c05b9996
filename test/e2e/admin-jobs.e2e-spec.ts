import type { ConsoleJob } from '../../src/console-api/console-view';
import { EventStreamQuota } from '../../src/security/event-stream-quota';
import { ALICE, BOB, ROOT, basicUsersEnvironment } from '../support/admin-auth';
import { Answer, postZip, request, REST } from '../support/rest-client';
import { SseEvent, SseReader } from '../support/sse-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/** Runs until cancelled: holds the node's one script slot, so the jobs after it stay queued. */
const SLEEPER = 'Sys.sleep(300)\n';
const QUICK = 'writeLines("done", "done.txt")\n';
/** Fails with what its input file says: run again, it fails again the same way. */
const FAILING = 'stop(paste("bad input:", readLines("data.txt")))\n';

/** A job as the console's API answers it. */
type Job = ConsoleJob;

interface Page {
  jobs: Job[];
  next: string | null;
  nextUri: string | null;
}

interface ErrorBody {
  status: number;
  error: string;
  message: string;
}

/** An admin route's plain JSON answer, its status checked. */
async function admin<T>(
  base: string,
  path: string,
  headers: Record<string, string>,
  status: number,
  init: RequestInit = {},
): Promise<T> {
  const answer = await request(`${base}${REST}/admin${path}`, {
    ...init,
    headers: { Accept: 'application/json', ...headers, ...(init.headers as object) },
  });
  expect({ path, status: answer.status, body: answer.text }).toMatchObject({ path, status });
  return JSON.parse(answer.text) as T;
}

function post<T>(
  base: string,
  path: string,
  headers: Record<string, string>,
  status: number,
  body?: unknown,
): Promise<T> {
  return admin<T>(base, path, headers, status, {
    method: 'POST',
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } }),
  });
}

async function submit(
  base: string,
  app: string,
  who: Record<string, string>,
  script: string,
  files: Array<{ name: string; content: string }> = [],
): Promise<string> {
  const answer: Answer = await postZip(
    base,
    await makeZip([{ name: 'job.R', content: script }, ...files]),
    { 'X-SVC-Application-Name': app, Accept: 'application/json', ...who },
  );
  expect(answer.status).toBe(202);
  return (JSON.parse(answer.text) as { jobId: string }).jobId;
}

/** Every job of every page, following nextUri. */
async function allPages(base: string, query: string, who: Record<string, string>): Promise<Job[]> {
  const jobs: Job[] = [];
  let page = await admin<Page>(base, `/jobs?${query}`, who, 200);
  jobs.push(...page.jobs);
  while (page.nextUri !== null) {
    expect(page.nextUri.startsWith(`${base}${REST}/admin/jobs?`)).toBe(true);
    const answer = await request(page.nextUri, { headers: { Accept: 'application/json', ...who } });
    expect(answer.status).toBe(200);
    page = JSON.parse(answer.text) as Page;
    jobs.push(...page.jobs);
  }
  return jobs;
}

/** The next event that is not a comment, or null when none comes within `ms`. */
async function nextEvent(reader: SseReader, ms: number): Promise<SseEvent | null> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      return null;
    }
    let timer: NodeJS.Timeout | undefined;
    const event = await Promise.race([
      reader.next(),
      new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), left))),
    ]).finally(() => clearTimeout(timer));
    if (event === 'timeout' || event === null) {
      return null;
    }
    if (event.event !== 'message' || event.data !== '') {
      return event;
    }
  }
}

describe('the operator console API (/admin/me, /admin/jobs, /admin/overview, /admin/events)', () => {
  let service: TestService;
  let base: string;
  let sleeper: string;
  /** Queued behind the sleeper: bob's five and alice's two, in the order submitted. */
  const bobs: string[] = [];
  const alices: string[] = [];

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        // alice administers demo; bob uses both; nobody but root administers other.
        demo: {
          adminPrincipals: ['alice'],
          userPrincipals: ['bob'],
          scriptSubmissionAllowed: true,
        },
        other: { userPrincipals: ['bob'], scriptSubmissionAllowed: true },
      })),
      SCRIPT_SLOTS: '1',
      AUTH_MAX_FAILURES: '1000',
      EVENT_STREAMS_PER_CALLER: '2',
    });
    base = service.url;
    sleeper = await submit(base, 'other', BOB, SLEEPER);
    await waitFor(
      async () => (await admin<Job>(base, `/jobs/other/${sleeper}`, ROOT, 200)).state === 'RUNNING',
      60000,
      'the sleeper to run',
    );
    for (let i = 0; i < 5; i++) {
      bobs.push(await submit(base, 'demo', BOB, QUICK));
    }
    for (let i = 0; i < 2; i++) {
      alices.push(await submit(base, 'demo', ALICE, QUICK));
    }
  }, 120000);

  afterAll(async () => {
    await service?.stop();
  });

  it('tells who the caller is: a global admin every application, an application admin theirs', async () => {
    const root = await admin<{ principal: string; globalAdmin: boolean; applications: string[] }>(
      base,
      '/me',
      ROOT,
      200,
    );
    expect(root).toEqual({
      principal: 'user:root',
      globalAdmin: true,
      applications: expect.arrayContaining(['demo', 'other']) as string[],
      apiKeysAccepted: false,
      auditActions: expect.arrayContaining(['job.cancelled', 'job.retried']) as string[],
    });
    expect(await admin(base, '/me', ALICE, 200)).toEqual({
      principal: 'user:alice',
      globalAdmin: false,
      applications: ['demo'],
      apiKeysAccepted: false,
      auditActions: [],
    });
    expect(await admin<ErrorBody>(base, '/me', BOB, 403)).toMatchObject({
      status: 403,
      message: 'user:bob is not an admin of any application.',
    });
    const anonymous = await request(`${base}${REST}/admin/me`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toContain('Basic');
    for (const path of ['/jobs', '/overview', `/jobs/demo/${bobs[0]}`]) {
      expect((await request(`${base}${REST}/admin${path}`)).status).toBe(401);
      expect((await request(`${base}${REST}/admin${path}`, { headers: BOB })).status).toBe(403);
    }
    expect(
      (await request(`${base}${REST}/admin/jobs/cancel`, { method: 'POST', headers: BOB })).status,
    ).toBe(403);
  });

  it('lists jobs newest first under filters, page by page without repeats', async () => {
    const queued = await allPages(base, 'application=demo&state=QUEUED&limit=3', ROOT);
    expect(queued.map((job) => job.jobId)).toEqual([...bobs, ...alices].reverse());
    const first = queued[queued.length - 1];
    expect(first).toMatchObject({
      applicationName: 'demo',
      kind: 'script',
      source: 'rest',
      state: 'QUEUED',
      outcome: 'queued',
      submittedBy: 'user:bob',
      startedAt: null,
      finishedAt: null,
      attempts: 0,
      lostRuns: 0,
      cancelledBy: null,
      links: {
        status: `${base}${REST}/jobs/demo/${bobs[0]}`,
        log: `${base}${REST}/jobs/demo/${bobs[0]}/log`,
        result: null,
        console: `${base}/svc/console/#/jobs/demo/${bobs[0]}`,
      },
    });
    // One job's answer adds its input files.
    expect(await admin<Job>(base, `/jobs/demo/${bobs[0]}`, ROOT, 200)).toEqual({
      ...first,
      inputFiles: {
        total: 1,
        files: [
          {
            name: 'job.R',
            size: expect.any(Number) as number,
            uri: expect.stringMatching(/\/admin\/jobs\/demo\/[-0-9a-f]+\/files\/\d+$/) as string,
          },
        ],
      },
    });

    const ids = async (query: string, who = ROOT): Promise<string[]> =>
      (await allPages(base, query, who)).map((job) => job.jobId);
    expect(await ids('principal=user:alice')).toEqual([...alices].reverse());
    expect(await ids('state=RUNNING')).toEqual([sleeper]);
    expect(await ids('state=RUNNING,QUEUED&application=other')).toEqual([sleeper]);
    expect(await ids('kind=script&source=rest&application=demo')).toHaveLength(7);
    expect(await ids('kind=xml')).toEqual([]);
    expect(await ids('source=form')).toEqual([]);
    expect(await ids('state=DONE')).toEqual([]);
    const bobsFirst = await admin<Job>(base, `/jobs/demo/${bobs[0]}`, ROOT, 200);
    expect(
      await ids(`application=demo&from=${encodeURIComponent(bobsFirst.submittedAt)}`),
    ).toHaveLength(7);
    expect(await ids(`to=${encodeURIComponent(bobsFirst.submittedAt)}`)).toEqual([sleeper]);
  });

  it('finds a job by its id or its first characters, and counts what a filter matches', async () => {
    type Counted = Page & { total: number; totalCapped: boolean };
    const target = bobs[2];
    for (const id of [target, target.slice(0, 8), target.slice(0, 13), target.toUpperCase()]) {
      const found = await admin<Counted>(base, `/jobs?id=${id}`, ROOT, 200);
      expect({ id, jobs: found.jobs.map((job) => job.jobId), total: found.total }).toEqual({
        id,
        jobs: [target],
        total: 1,
      });
    }
    // One hex digit: the jobs whose id starts with it, no other.
    const digit = target[0];
    const byDigit = await allPages(base, `id=${digit}`, ROOT);
    expect(byDigit.map((job) => job.jobId)).toContain(target);
    expect(byDigit.every((job) => job.jobId.startsWith(digit))).toBe(true);
    // The total counts every page's jobs, not the page's.
    const paged = await admin<Counted>(
      base,
      '/jobs?application=demo&state=QUEUED&limit=2',
      ROOT,
      200,
    );
    expect([paged.jobs.length, paged.total, paged.totalCapped]).toEqual([2, 7, false]);
    // An application admin finds their jobs only: another application's id matches nothing.
    expect((await admin<Counted>(base, `/jobs?id=${sleeper}`, ALICE, 200)).jobs).toEqual([]);
    expect((await admin<Counted>(base, `/jobs?id=${sleeper}`, ALICE, 200)).total).toBe(0);
    await admin<ErrorBody>(base, `/jobs?id=${sleeper}&application=other`, ALICE, 403);
    for (const id of ['xyz', '0'.repeat(33), `${target}0`, '%20']) {
      const body = await admin<ErrorBody>(base, `/jobs?id=${id}`, ROOT, 400);
      expect(body.message).toContain('id must be a job id or its first hex digits');
    }
  });

  it('answers 400 naming the parameter for every bad filter', async () => {
    for (const [query, message] of [
      ['state=BOGUS', 'state must be one of'],
      ['kind=callback', 'kind must be one of script, xml, json.'],
      ['source=mail_reply', 'source must be one of'],
      ['principal=alice', 'principal must be <kind>:<name>'],
      ['from=yesterday', 'from must be a time in ISO 8601'],
      ['to=2026-01-01', 'to must be a time in ISO 8601'],
      ['from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'from must be before to.'],
      ['limit=0', 'limit must be a whole number from 1 to 200.'],
      ['limit=201', 'limit must be a whole number from 1 to 200.'],
      ['cursor=garbage', 'cursor must be the value of next'],
      ['application=no%20such', 'The application parameter'],
      ['state=QUEUED&state=RUNNING', 'state must be given once'],
    ]) {
      const body = await admin<ErrorBody>(base, `/jobs?${query}`, ROOT, 400);
      expect({ query, message: body.message }).toEqual({
        query,
        message: expect.stringContaining(message) as string,
      });
    }
    expect((await admin<ErrorBody>(base, '/jobs/demo/not-a-uuid', ROOT, 400)).status).toBe(400);
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await admin<ErrorBody>(base, `/jobs/demo/${unknown}`, ROOT, 404)).message).toBe(
      `Application demo has no job ${unknown}.`,
    );
  });

  it('keeps an application admin to their applications, whatever the filter (hostile)', async () => {
    const seen = await allPages(base, 'limit=2', ALICE);
    expect(new Set(seen.map((job) => job.applicationName))).toEqual(new Set(['demo']));
    expect(seen).toHaveLength(7);
    expect(await allPages(base, 'principal=user:bob&state=RUNNING', ALICE)).toEqual([]);
    expect((await admin<ErrorBody>(base, '/jobs?application=other', ALICE, 403)).message).toBe(
      'user:alice is not an admin of application other.',
    );
    await admin(base, `/jobs/other/${sleeper}`, ALICE, 404);
    await post(base, `/jobs/other/${sleeper}/retry`, ALICE, 404);
    await post(base, '/jobs/cancel', ALICE, 403, { application: 'other' });
    // A cancel with no application, or naming bob, reaches only demo's jobs.
    const cancelled = await post<{ cancelled: number; jobIds: string[]; more: boolean }>(
      base,
      '/jobs/cancel',
      ALICE,
      200,
      { principal: 'user:bob', state: 'RUNNING' },
    );
    expect(cancelled).toEqual({ cancelled: 0, jobIds: [], more: false });
    expect((await admin<Job>(base, `/jobs/other/${sleeper}`, ROOT, 200)).state).toBe('RUNNING');
  });

  it('cancels a bounded number of jobs at a time, says whether more matched, and audits each', async () => {
    for (const [body, message] of [
      [{ limit: 0 }, 'limit: must be a whole number from 1 to 1000'],
      [{ limit: 1001 }, 'limit: must be a whole number from 1 to 1000'],
      [{ state: 'DONE' }, 'state must be one of QUEUED, RUNNING.'],
      [{ colour: 'blue' }, 'colour: unknown field'],
      [{ application: 7 }, 'application: must be a string when given'],
      [[1, 2], 'The body must be a JSON object'],
    ] as const) {
      const error = await post<ErrorBody>(base, '/jobs/cancel', ALICE, 400, body);
      expect(error.message).toContain(message);
    }
    const first = await post<{ cancelled: number; jobIds: string[]; more: boolean }>(
      base,
      '/jobs/cancel',
      ALICE,
      200,
      { state: 'QUEUED', limit: 2 },
    );
    expect(first).toEqual({ cancelled: 2, jobIds: [...alices].reverse(), more: true });
    const rest = await post<{ cancelled: number; jobIds: string[]; more: boolean }>(
      base,
      '/jobs/cancel',
      ALICE,
      200,
      { principal: 'user:bob', limit: 1000 },
    );
    expect(rest).toEqual({ cancelled: 5, jobIds: [...bobs].reverse(), more: false });
    const job = await admin<Job>(base, `/jobs/demo/${bobs[0]}`, ALICE, 200);
    expect(job).toMatchObject({
      state: 'DONE',
      outcome: 'cancelled',
      cancelledBy: 'user:alice',
      links: { result: `${base}${REST}/result/demo/${bobs[0]}.txt` },
    });
    expect(await allPages(base, 'state=CANCELLED', ALICE)).toHaveLength(7);
    expect(await allPages(base, 'state=FAILED', ALICE)).toEqual([]);
    // The root ends the sleeper, which frees the slot.
    expect(
      await post(base, '/jobs/cancel', ROOT, 200, { application: 'other', state: 'RUNNING' }),
    ).toEqual({ cancelled: 1, jobIds: [sleeper], more: false });

    const audit = await admin<{
      auditEvents: Array<{ action: string; jobId: string; principal: string; jobUri: string }>;
    }>(base, '/audit?action=job.cancelled&format=json', ROOT, 200);
    const byJob = new Map(audit.auditEvents.map((row) => [row.jobId, row]));
    expect(byJob.get(bobs[0])).toMatchObject({
      principal: 'user:alice',
      jobUri: `${base}/svc/console/#/jobs/demo/${bobs[0]}`,
    });
    expect(byJob.get(sleeper)).toMatchObject({
      principal: 'user:root',
      jobUri: `${base}/svc/console/#/jobs/other/${sleeper}`,
    });
    const csv = await request(`${base}${REST}/admin/audit?action=job.cancelled&format=csv`, {
      headers: ROOT,
    });
    expect(csv.text.split('\r\n')[0]).toContain(',jobId,jobUri,');
    expect(csv.text).toContain(`,${bobs[0]},${base}/svc/console/#/jobs/demo/${bobs[0]},`);
  });

  it('retries a failed job, which runs again on its kept input; refuses jobs that did not fail', async () => {
    const failing = await submit(base, 'demo', BOB, FAILING, [
      { name: 'data.txt', content: 'first\n' },
    ]);
    const failed = await waitFor(
      async () => {
        const job = await admin<Job>(base, `/jobs/demo/${failing}`, ALICE, 200);
        return job.state === 'DONE' && job;
      },
      60000,
      'the failing job to end',
    );
    expect(failed).toMatchObject({ outcome: 'failed', attempts: 1 });
    expect((await allPages(base, 'state=FAILED', ALICE)).map((job) => job.jobId)).toEqual([
      failing,
    ]);

    await post(base, `/jobs/demo/${failing}/retry`, BOB, 403);
    const retried = await post<Job>(base, `/jobs/demo/${failing}/retry`, ALICE, 202);
    expect(retried.jobId).toBe(failing);
    expect(['QUEUED', 'RUNNING']).toContain(retried.state);
    expect(retried).toMatchObject({ finishedAt: null, lostRuns: 0, links: { result: null } });
    const again = await waitFor(
      async () => {
        const job = await admin<Job>(base, `/jobs/demo/${failing}`, ALICE, 200);
        return job.state === 'DONE' && job;
      },
      60000,
      'the retried job to end',
    );
    expect(again).toMatchObject({ outcome: 'failed', attempts: 2 });
    // It ran on its input file again: the failure says what the file says.
    expect(again.links.result).toMatch(new RegExp(`/result/demo/${failing}\\.\\w+$`));
    const result = await request(again.links.result!, { headers: BOB });
    expect(result.text).toContain('bad input: first');

    const audit = await admin<{ auditEvents: Array<{ jobId: string; jobUri: string }> }>(
      base,
      '/audit?action=job.retried&format=json',
      ROOT,
      200,
    );
    expect(audit.auditEvents).toEqual([
      expect.objectContaining({
        jobId: failing,
        principal: 'user:alice',
        jobUri: `${base}/svc/console/#/jobs/demo/${failing}`,
      }),
    ]);

    const quick = await submit(base, 'demo', BOB, QUICK);
    await waitFor(
      async () => (await admin<Job>(base, `/jobs/demo/${quick}`, ROOT, 200)).state === 'DONE',
      60000,
      'the quick job to end',
    );
    expect((await admin<Job>(base, `/jobs/demo/${quick}`, ROOT, 200)).outcome).toBe('succeeded');
    expect((await post<ErrorBody>(base, `/jobs/demo/${quick}/retry`, ROOT, 409)).message).toBe(
      `Job ${quick} succeeded: only a failed job can be retried.`,
    );
    expect((await post<ErrorBody>(base, `/jobs/other/${sleeper}/retry`, ROOT, 409)).message).toBe(
      `Job ${sleeper} was cancelled: only a failed job can be retried; submit it again instead.`,
    );
    const unknown = '00000000-0000-4000-8000-000000000000';
    await post(base, `/jobs/demo/${unknown}/retry`, ROOT, 404);
  }, 180000);

  it('gives an overview: applications, the series of the last hour and day, the workers', async () => {
    interface Overview {
      generatedAt: string;
      applications: Array<Record<string, unknown>>;
      series: Record<
        'hour' | 'day',
        { bucketSeconds: number; buckets: Array<Record<string, number | string | null>> }
      >;
      workers: Array<Record<string, unknown>>;
    }
    const overview = await admin<Overview>(base, '/overview', ROOT, 200);
    expect(overview.applications).toEqual(
      expect.arrayContaining([
        { application: 'demo', queued: 0, running: 0, succeededLastHour: 1, failedLastHour: 1 },
        { application: 'other', queued: 0, running: 0, succeededLastHour: 0, failedLastHour: 0 },
      ]),
    );
    expect(overview.series.hour.bucketSeconds).toBe(60);
    expect(overview.series.hour.buckets).toHaveLength(60);
    expect(overview.series.day.bucketSeconds).toBe(900);
    expect(overview.series.day.buckets).toHaveLength(96);
    for (const series of [overview.series.hour, overview.series.day]) {
      const buckets = series.buckets;
      // Every job of this test started and ended within the last hour.
      // The eight cancelled, the failed one (once: its first end was cleared by the retry) and
      // the quick one; started: the sleeper, the failed one's last run and the quick one.
      expect(buckets.reduce((sum, b) => sum + (b.finished as number), 0)).toBe(10);
      expect(buckets.reduce((sum, b) => sum + (b.started as number), 0)).toBe(3);
      expect(buckets[buckets.length - 1].queueDepth).toBe(0);
      expect(buckets.some((b) => b.runP50Ms !== null && b.runP95Ms !== null)).toBe(true);
      expect(buckets.some((b) => b.waitP50Ms !== null && b.waitP95Ms !== null)).toBe(true);
      expect(Date.parse(buckets[1].at as string) - Date.parse(buckets[0].at as string)).toBe(
        series.bucketSeconds * 1000,
      );
    }
    expect(overview.workers).toEqual([
      {
        node: expect.any(String) as string,
        role: 'all',
        rEngine: service.config.rEngine,
        slots: expect.any(Number) as number,
        busy: expect.any(Number) as number,
        free: expect.any(Number) as number,
        heartbeatAt: expect.any(String) as string,
        stale: false,
        version: expect.any(String) as string,
        startedAt: expect.any(String) as string,
        memoryBytes: expect.any(Number) as number,
        runningJobs: expect.any(Array) as unknown[],
      },
    ]);
    const mine = await admin<Overview>(base, '/overview', ALICE, 200);
    expect(mine.applications.map((entry) => entry.application)).toEqual(['demo']);
  });

  it('streams a jobs event when a visible job is queued, and none of other applications', async () => {
    const plain = await request(`${base}${REST}/admin/events`, { headers: ROOT });
    expect(plain.status).toBe(406);
    const streams = new AbortController();
    const open = async (who: Record<string, string>): Promise<SseReader> => {
      const response = await fetch(`${base}${REST}/admin/events`, {
        headers: { Accept: 'text/event-stream', ...who },
        signal: streams.signal,
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      return new SseReader(response.body!.getReader());
    };
    try {
      const rootEvents = await open(ROOT);
      const aliceEvents = await open(ALICE);
      /** The events of `reader` up to the first about `application`. */
      const until = async (reader: SseReader, application: string): Promise<string[]> => {
        const seen: string[] = [];
        for (;;) {
          const next = await nextEvent(reader, 10000);
          expect(next).toMatchObject({ event: 'jobs' });
          const about = (JSON.parse(next!.data) as { application: string }).application;
          seen.push(about);
          if (about === application) {
            return seen;
          }
        }
      };
      await submit(base, 'other', BOB, QUICK);
      await until(rootEvents, 'other');
      await submit(base, 'demo', BOB, QUICK);
      // alice hears of demo's job, never of other's.
      expect(new Set(await until(aliceEvents, 'demo'))).toEqual(new Set(['demo']));
    } finally {
      streams.abort();
    }
  }, 60000);

  it('holds each caller to EVENT_STREAMS_PER_CALLER open streams, live logs and events together', async () => {
    const streams = new AbortController();
    const open = (path: string, who: Record<string, string>): Promise<Response> =>
      fetch(`${base}${REST}${path}`, {
        headers: { Accept: 'text/event-stream', ...who },
        signal: streams.signal,
      });
    const rootsFirst = new AbortController();
    const quota = service.app.get(EventStreamQuota);
    // The streams of the test before are given back once the node sees their clients gone.
    await waitFor(
      async () => Promise.resolve(quota.heldBy('user:root') + quota.heldBy('user:alice') === 0),
      10000,
      'the earlier streams to be given back',
    );
    try {
      const first = await fetch(`${base}${REST}/admin/events`, {
        headers: { Accept: 'text/event-stream', ...ROOT },
        signal: rootsFirst.signal,
      });
      expect(first.status).toBe(200);
      expect((await open('/admin/events', ROOT)).status).toBe(200);
      // root holds two: a third, of either kind, is refused with the error body.
      for (const path of ['/admin/events', `/jobs/other/${sleeper}/log`]) {
        const refused = await open(path, { ...ROOT, Accept: 'text/event-stream' });
        expect(refused.status).toBe(429);
        expect(refused.headers.get('retry-after')).toBe('5');
        expect(await refused.text()).toMatch(/EVENT_STREAMS_PER_CALLER=2/);
      }
      // Other callers are not held back by root's.
      expect((await open('/admin/events', ALICE)).status).toBe(200);
      // root lets go of one and may open another.
      rootsFirst.abort();
      await waitFor(
        async () => {
          const again = await open('/admin/events', ROOT);
          return again.status === 200 ? again : (await again.text(), null);
        },
        10000,
        "root's stream to be given back",
      );
    } finally {
      rootsFirst.abort();
      streams.abort();
    }
  }, 60000);
});
