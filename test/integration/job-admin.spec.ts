import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { errorResult, resultData } from '../../src/job-core/job-result';
import { JobAdminRepository, JobFilter } from '../../src/queue/job-admin.repository';
import { MailReplyJobsRepository } from '../../src/queue/mail-reply-jobs.repository';
import { QueueRepository } from '../../src/queue/queue.repository';
import { WorkerNodesRepository } from '../../src/queue/worker-nodes.repository';
import { NodeIdentity } from '../../src/storage/node-identity';
import { openMigratedDatabase } from '../support/migrated-database';

const ALL: JobFilter = {
  applications: null,
  states: [],
  kind: null,
  source: null,
  principal: null,
  from: null,
  to: null,
};

/** The operator console's statements on job and worker_node against a real database. */
describe('the console statements (JobAdminRepository, WorkerNodesRepository)', () => {
  let dataSource: DataSource;
  let drop: () => Promise<void>;
  let queue: QueueRepository;
  let jobs: JobAdminRepository;
  let replyJobs: MailReplyJobsRepository;
  const node = new NodeIdentity();

  beforeAll(async () => {
    ({ dataSource, drop } = await openMigratedDatabase());
    queue = new QueueRepository(dataSource, node);
    replyJobs = new MailReplyJobsRepository(dataSource);
    jobs = new JobAdminRepository(dataSource, node, replyJobs);
  });

  afterAll(async () => {
    await drop();
  });

  beforeEach(async () => {
    await dataSource.query('DELETE FROM job');
    await dataSource.query('DELETE FROM mail_reply');
    await dataSource.query('DELETE FROM drop_file');
  });

  async function submit(
    applicationName = 'demo',
    submittedAt = new Date(),
    submittedBy: string | null = 'user:bob',
  ): Promise<string> {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName,
      kind: 'script',
      meta: {},
      source: 'rest',
      submittedAt,
      submittedBy,
      files: [{ name: 'job.R', content: Buffer.from('stop("no")') }],
    });
    return id;
  }

  async function inputs(id: string): Promise<number> {
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM job_file WHERE job_id = $1',
      [id],
    );
    return rows[0].n;
  }

  async function runToEnd(id: string, success: boolean): Promise<void> {
    await queue.claim('w1', 10, 30, null);
    const result = success
      ? resultData(true, 'txt', 'text/plain', Buffer.from('ok'))
      : errorResult({ id, applicationName: 'demo', submittedAt: new Date() }, 'R failed');
    expect(await queue.complete(id, 'w1', result)).toBe(true);
  }

  it('records who submitted a job, and keeps a failed job its input files until it goes', async () => {
    const failed = await submit();
    const succeeded = await submit('demo', new Date(), null);
    await runToEnd(failed, false);
    await runToEnd(succeeded, true);
    expect(await inputs(failed)).toBe(1);
    expect(await inputs(succeeded)).toBe(0);
    expect((await jobs.findOne('demo', failed))?.submitted_by).toBe('user:bob');
    expect((await jobs.findOne('demo', succeeded))?.submitted_by).toBeNull();
    // Retention deletes the job with its result, and its files with it.
    await dataSource.query("UPDATE result SET result_time = now() - interval '2 hours'");
    expect(await queue.deleteExpiredResults(1)).toBe(2);
    expect(await inputs(failed)).toBe(0);
  });

  it('retries only a failed job that kept its inputs: queued again, result gone, attempts kept', async () => {
    const failed = await submit();
    await runToEnd(failed, false);
    const succeeded = await submit();
    await runToEnd(succeeded, true);
    const queued = await submit();
    expect(await jobs.retry('demo', queued, null)).toEqual({
      outcome: 'refused',
      reason: 'queued',
    });
    expect(await jobs.retry('demo', succeeded, null)).toEqual({
      outcome: 'refused',
      reason: 'succeeded',
    });
    expect(await jobs.retry('other', failed, null)).toEqual({ outcome: 'unknown' });
    expect(await jobs.retry('demo', failed, null)).toEqual({
      outcome: 'retried',
      repliesQueued: false,
    });
    expect(await jobs.findOne('demo', failed)).toMatchObject({
      state: 'QUEUED',
      started_at: null,
      finished_at: null,
      attempts: 1,
      lost_runs: 0,
      success: null,
      result_type: null,
    });
    expect(await jobs.retry('demo', failed, null)).toEqual({
      outcome: 'refused',
      reason: 'queued',
    });
    // It is claimed again, with its file, and counts its second attempt.
    const claimed = await queue.claim('w1', 10, 30, null);
    const again = claimed.find((job) => job.id === failed);
    expect(again?.files.map((file) => file.name)).toEqual(['job.R']);
    expect(again?.attempts).toBe(2);
  });

  it('gives a retried job with a callback a new callback with its new result', async () => {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName: 'demo',
      kind: 'script',
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [{ name: 'job.R', content: Buffer.from('stop("no")') }],
      callback: { url: 'https://hooks.example.com/done', linksBase: 'https://svc.example.com' },
    });
    const callbacks = async (): Promise<unknown[]> => [
      ...(await dataSource.query<unknown[]>('SELECT state FROM job_callback WHERE job_id = $1', [
        id,
      ])),
      ...(await dataSource.query<unknown[]>('SELECT kind FROM job WHERE callback_of = $1', [id])),
    ];
    await runToEnd(id, false);
    expect(await callbacks()).toEqual([{ state: 'pending' }, { kind: 'callback' }]);
    expect(await jobs.retry('demo', id, null)).toEqual({
      outcome: 'retried',
      repliesQueued: false,
    });
    expect(await callbacks()).toEqual([]);
    await runToEnd(id, false);
    expect(await callbacks()).toEqual([{ state: 'pending' }, { kind: 'callback' }]);
  });

  it('owes the new outcome where the failed one went: its e-mail reply again, its drop file rewritten', async () => {
    const id = await submit();
    await runToEnd(id, false);
    const oldReplyJob = randomUUID();
    await dataSource.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_to, reply_from, attach_max_bytes, attempts, reply_job_id,
                               first_attempt_at, last_error, replied_at)
       VALUES ('inbox', '7:1', 'demo', $1, 'sent', now(), 'ann@example.com', 'svc@example.com',
               1000, 2, $2, now(), 'busy', now())`,
      [id, oldReplyJob],
    );
    await dataSource.query(
      `INSERT INTO drop_file (application_name, claim_id, file_name, job_id, claimed_at,
                              submitted_at, result_written_at)
       VALUES ('demo', 'c1', 'in.zip', $1, now() - interval '30 days', now() - interval '30 days',
               now() - interval '30 days')`,
      [id],
    );
    expect(await jobs.retry('demo', id, null)).toEqual({ outcome: 'retried', repliesQueued: true });
    const [reply] = await dataSource.query<
      Array<{ state: string; attempts: number; replied_at: Date | null; reply_job_id: string }>
    >(
      `SELECT state, attempts, replied_at, last_error, reply_job_id FROM mail_reply
        WHERE source = 'inbox' AND source_key = '7:1'`,
    );
    expect(reply).toMatchObject({
      state: 'pending',
      attempts: 0,
      replied_at: null,
      last_error: null,
    });
    expect(reply.reply_job_id).not.toBe(oldReplyJob);
    expect(
      await dataSource.query('SELECT kind, state FROM job WHERE id = $1', [reply.reply_job_id]),
    ).toEqual([{ kind: 'mail_reply', state: 'QUEUED' }]);
    // The drop directory writes the new result; its record is kept for a week from the retry.
    expect(
      await dataSource.query(
        `SELECT result_written_at, claimed_at > now() - interval '1 minute' AS recent
           FROM drop_file WHERE claim_id = 'c1'`,
      ),
    ).toEqual([{ result_written_at: null, recent: true }]);
    // The reply waits for the new result, then goes.
    expect(await replyJobs.claim('w1', 10, 30)).toEqual([]);
    await runToEnd(id, false);
    expect((await replyJobs.claim('w1', 10, 30)).map((job) => job.id)).toEqual([
      reply.reply_job_id,
    ]);
  });

  it('owes one reply, not two, to retries made at once', async () => {
    const id = await submit();
    await runToEnd(id, false);
    await dataSource.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_to, reply_from, attach_max_bytes)
       VALUES ('inbox', '9:1', 'demo', $1, 'sent', now(), 'ann@example.com', 'svc@example.com',
               1000)`,
      [id],
    );
    const outcomes = await Promise.all([
      jobs.retry('demo', id, null),
      jobs.retry('demo', id, null),
      jobs.retry('demo', id, null),
    ]);
    expect(outcomes.filter((outcome) => outcome.outcome === 'retried')).toEqual([
      { outcome: 'retried', repliesQueued: true },
    ]);
    expect(
      await dataSource.query("SELECT count(*)::int AS n FROM job WHERE kind = 'mail_reply'"),
    ).toEqual([{ n: 1 }]);
  });

  it('owes no reply again where none was owed or one is still on its way', async () => {
    const ids = [await submit(), await submit()];
    for (const id of ids) {
      await runToEnd(id, false);
    }
    await dataSource.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_to, reply_from, attach_max_bytes)
       VALUES ('inbox', '8:1', 'demo', $1, 'none', now(), NULL, 'svc@example.com', 1000),
              ('inbox', '8:2', 'demo', $2, 'pending', now(), 'ann@example.com',
               'svc@example.com', 1000)`,
      ids,
    );
    for (const id of ids) {
      expect(await jobs.retry('demo', id, null)).toEqual({
        outcome: 'retried',
        repliesQueued: false,
      });
    }
    expect(
      await dataSource.query(
        "SELECT source_key, state FROM mail_reply WHERE source = 'inbox' ORDER BY source_key",
      ),
    ).toEqual([
      { source_key: '8:1', state: 'none' },
      { source_key: '8:2', state: 'pending' },
    ]);
  });

  it('pages newest first without repeats, under filters, within the applications given', async () => {
    const t0 = Date.parse('2026-11-02T10:00:00Z');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      // Two jobs share each submission time: the id breaks the tie.
      ids.push(await submit('demo', new Date(t0 + Math.floor(i / 2) * 1000)));
    }
    const other = await submit('other', new Date(t0 + 5000), 'user:carol');
    const seen: string[] = [];
    let after = null;
    for (;;) {
      const page = await jobs.list({ ...ALL, applications: ['demo'] }, 2, after);
      seen.push(...page.map((row) => row.id));
      if (page.length < 2) {
        break;
      }
      const last = page[page.length - 1];
      after = { at: last.position_at, id: last.id };
    }
    expect(seen).toHaveLength(5);
    expect(new Set(seen)).toEqual(new Set(ids));
    const times = seen.map((id) => ids.indexOf(id)).map((i) => Math.floor(i / 2));
    expect(times).toEqual([...times].sort().reverse());
    expect(
      (await jobs.list({ ...ALL, principal: 'user:carol' }, 10, null)).map((r) => r.id),
    ).toEqual([other]);
    expect(
      await jobs.list({ ...ALL, applications: ['demo'], principal: 'user:carol' }, 10, null),
    ).toEqual([]);
    const window = { ...ALL, from: new Date(t0 + 1000), to: new Date(t0 + 2000) };
    expect(new Set((await jobs.list(window, 10, null)).map((r) => r.id))).toEqual(
      new Set(ids.slice(2, 4)),
    );
    expect(
      await jobs.matching({ ...ALL, applications: ['other'], states: ['QUEUED', 'RUNNING'] }, 10),
    ).toEqual([{ id: other, application_name: 'other', kind: 'script' }]);
  });

  it('counts the queue at each bucket end, and the waits and runs of the jobs in a bucket', async () => {
    // Three jobs submitted 30 min ago; one started 20 min ago and ended 10 min ago.
    const ids = [await submit(), await submit(), await submit()];
    await dataSource.query(
      "UPDATE job SET submitted_at = now() - interval '30 minutes' WHERE id = ANY($1::uuid[])",
      [ids],
    );
    await dataSource.query(
      `UPDATE job SET state = 'DONE', started_at = now() - interval '20 minutes',
              finished_at = now() - interval '10 minutes' WHERE id = $1`,
      [ids[0]],
    );
    const buckets = await jobs.overviewSeries(['demo'], 60, 60);
    expect(buckets).toHaveLength(60);
    const depthAt = (minutesAgo: number): number => buckets[59 - minutesAgo].queue_depth;
    expect(depthAt(35)).toBe(0);
    expect(depthAt(25)).toBe(3);
    expect(depthAt(15)).toBe(2);
    expect(depthAt(0)).toBe(2);
    expect(buckets.reduce((sum, b) => sum + b.started, 0)).toBe(1);
    const started = buckets.find((b) => b.started === 1)!;
    expect(started.wait_p50).toBeCloseTo(10 * 60 * 1000, -3);
    const finished = buckets.find((b) => b.finished === 1)!;
    expect(finished.run_p95).toBeCloseTo(10 * 60 * 1000, -3);
    // It ended without a result: finished, but neither succeeded nor failed.
    expect([finished.succeeded, finished.failed]).toEqual([0, 0]);
    // Two more end now: one succeeds, one fails; the last bucket says so.
    await runToEnd(ids[1], true);
    await runToEnd(ids[2], false);
    const now = (await jobs.overviewSeries(['demo'], 60, 60))[59];
    expect([now.finished, now.succeeded, now.failed]).toEqual([2, 1, 1]);
    expect(await jobs.overviewSeries(['other'], 900, 96)).toHaveLength(96);
    expect(await jobs.overviewApplications(null)).toEqual([
      {
        application_name: 'demo',
        queued: 0,
        running: 0,
        succeeded_last_hour: 1,
        failed_last_hour: 1,
      },
    ]);
  });

  const NODE = {
    nodeId: 'n1',
    role: 'worker',
    rEngine: 'native',
    slots: 4,
    busy: 0,
    version: '1.2.3',
    startedAt: new Date(),
    memoryBytes: 100 * 2 ** 20,
  };

  it('keeps one heartbeat row per worker node, forgotten when it stops', async () => {
    const nodes = new WorkerNodesRepository(dataSource);
    const startedAt = new Date('2026-12-01T10:00:00.000Z');
    const report = { ...NODE, startedAt, slots: 4 };
    await nodes.beat(report);
    await nodes.beat({ ...report, slots: 3, memoryBytes: 2 ** 33 });
    const { nodes: rows } = await nodes.list();
    expect(rows).toEqual([
      {
        ...report,
        slots: 3,
        memoryBytes: 2 ** 33,
        heartbeatAt: expect.any(Date) as Date,
        runningJobs: [],
      },
    ]);
    await nodes.remove('n1');
    expect((await nodes.list()).nodes).toEqual([]);
  });

  it('counts a node busy slots from the R jobs it runs now, not from its last heartbeat', async () => {
    const nodes = new WorkerNodesRepository(dataSource);
    // The heartbeat said 3 busy a while ago; the node has claimed two jobs since, one finished.
    await nodes.beat({ ...NODE, busy: 3 });
    const [first, second] = [await submit(), await submit('other')];
    await submit();
    expect(await queue.claim('n1', 2, 30, null)).toHaveLength(2);
    expect((await nodes.list()).nodes[0].busy).toBe(2);
    // Its running jobs are named only for the applications asked for; busy counts them all.
    const [ofOther] = (await nodes.list(['other'])).nodes;
    expect([ofOther.busy, ofOther.runningJobs.map((job) => job.jobId)]).toEqual([2, [second]]);
    expect(ofOther.runningJobs[0]).toEqual({
      applicationName: 'other',
      jobId: second,
      startedAt: expect.any(Date) as Date,
    });
    const done = (
      await dataSource.query<Array<{ id: string }>>(
        "SELECT id FROM job WHERE state = 'RUNNING' ORDER BY id LIMIT 1",
      )
    )[0].id;
    expect([first, second]).toContain(done);
    expect(
      await queue.complete(done, 'n1', resultData(true, 'txt', 'text/plain', Buffer.from('ok'))),
    ).toBe(true);
    const [row] = (await nodes.list()).nodes;
    expect(row.busy).toBe(1);
    // The overview's running count of every application says the same at the same moment.
    const running = (await jobs.overviewApplications(null)).reduce((n, a) => n + a.running, 0);
    expect(running).toBe(row.busy);
    await nodes.remove('n1');
    expect((await nodes.list()).nodes).toEqual([]);
  });
});
