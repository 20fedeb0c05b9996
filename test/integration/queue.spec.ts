import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { errorResult, resultData } from '../../src/job-core/job-result';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { CLAIM_APPLICATION_NAME } from '../../src/queue/claim-connection';
import { QueueRepository } from '../../src/queue/queue.repository';
import { RESULT_READY_CHANNEL } from '../../src/queue/queue-channels';
import { loadConfig } from '../../src/config/app-config';
import { DatabaseEvents, parseNotification } from '../../src/storage/database-events.service';
import { NodeIdentity } from '../../src/storage/node-identity';
import {
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
  waitFor,
} from '../support/test-service';
import { MigratedDatabase, openMigratedDatabase } from '../support/migrated-database';
import type { ExpiredJob, JobKind } from '../../src/queue/queue.types';

/** LISTEN/NOTIFY between connections needs the server; PGlite is one process with no other nodes. */
const onServer = SERVER_DATABASE_URL ? it : it.skip;

/** The claim, lease, retry and dead-letter SQL against a real database (server or PGlite). */
describe('queue repository', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let opened: MigratedDatabase;
  let queue: QueueRepository;
  const node = new NodeIdentity();

  beforeAll(async () => {
    opened = await openMigratedDatabase();
    ({ database, dataSource } = opened);
    queue = new QueueRepository(dataSource, node);
  });

  afterAll(() => opened.drop());

  beforeEach(async () => {
    await dataSource.query('DELETE FROM job');
  });

  async function submit(
    applicationName = 'demo',
    submittedAt = new Date(),
    kind: JobKind = 'script',
  ): Promise<string> {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName,
      kind,
      meta: {},
      source: 'rest',
      submittedAt,
      files: [],
    });
    return id;
  }

  async function row(id: string): Promise<Record<string, unknown>> {
    const rows = await dataSource.query<Array<Record<string, unknown>>>(
      'SELECT state, attempts, lease_owner, last_error, run_after > now() AS delayed FROM job WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  /** Lets a job whose run_after is still to come be claimed now. */
  async function makeClaimable(id: string): Promise<void> {
    await dataSource.query(`UPDATE job SET run_after = now() - interval '1 second' WHERE id = $1`, [
      id,
    ]);
  }

  const ok = resultData(true, 'zip', 'application/zip', Buffer.from('zip'));

  /** The dead letter the supervisor stores, as the worker makes it. */
  const deadLetter = (job: ExpiredJob) =>
    errorResult(job, `dead after ${job.attempts} attempt(s): ${job.lastError ?? ''}`);

  /** The job's stored result: whether it succeeded, and its text. */
  async function storedResult(id: string): Promise<{ success: boolean; text: string } | undefined> {
    const rows = await dataSource.query<Array<{ success: boolean; text: string }>>(
      `SELECT success, convert_from(data, 'UTF8') AS text FROM result WHERE job_id = $1`,
      [id],
    );
    return rows[0];
  }

  it('claims the oldest jobs first, each by one worker only, under contention', async () => {
    const base = Date.now() - 100_000;
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      ids.push(await submit('demo', new Date(base + i * 1000)));
    }
    const first = await queue.claim('w0', 2, 30, null);
    expect(first.map((j) => j.id)).toEqual(ids.slice(0, 2));
    expect(first[0]).toMatchObject({
      applicationName: 'demo',
      kind: 'script',
      attempts: 1,
      files: [],
    });
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, w) => queue.claim(`w${w + 1}`, 5, 30, null)),
    );
    const claimed = [...first, ...claims.flat()].map((j) => j.id);
    expect(new Set(claimed).size).toBe(claimed.length);
    expect(claimed.sort()).toEqual([...ids].sort());
    expect(await queue.claim('late', 5, 30, null)).toEqual([]);
  });

  it('gives a dedicated slot only its own application’s jobs', async () => {
    await submit('flood');
    const vip = await submit('vip');
    expect((await queue.claim('w', 5, 30, 'vip')).map((j) => j.id)).toEqual([vip]);
    expect(await queue.claim('w', 5, 30, 'vip')).toEqual([]);
  });

  it('claims script and function-call jobs for their own slots in one statement', async () => {
    const scripts = [await submit(), await submit(), await submit()];
    const call = await submit('demo', new Date(), 'json');
    const claimed = await queue.claim('w', 2, 30, null, ['script'], {
      kinds: ['xml', 'json'],
      limit: 2,
    });
    expect(claimed.map((j) => j.id).sort()).toEqual([scripts[0], scripts[1], call].sort());
    // A pool with no room asks for nothing of its kinds.
    expect(await queue.claim('w', 0, 30, null, ['script'], { kinds: ['json'], limit: 1 })).toEqual(
      [],
    );
    expect((await queue.claim('w', 1, 30, null, ['script'])).map((j) => j.id)).toEqual([
      scripts[2],
    ]);
  });

  it('stores exactly one result, only for the worker that holds the lease', async () => {
    const id = await submit();
    await queue.claim('w1', 1, 30, null);
    expect(await queue.complete(id, 'intruder', ok)).toBe(false);
    expect(await queue.complete(id, 'w1', ok)).toBe(true);
    expect(await queue.complete(id, 'w1', ok)).toBe(false);
    expect(
      await dataSource.query('SELECT count(*)::int AS n FROM result WHERE job_id = $1', [id]),
    ).toEqual([{ n: 1 }]);
    expect(await row(id)).toMatchObject({ state: 'DONE', lease_owner: null });
  });

  it('stores the result, ends the job and deletes its files in one statement', async () => {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName: 'demo',
      kind: 'script',
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [
        { name: 'plot.R', content: Buffer.from('plot(1)') },
        { name: 'data.csv', content: Buffer.from([0, 1, 2, 255]) },
      ],
    });
    // The claim brings the files along, in the order they were stored.
    const [claimed] = await queue.claim('w1', 1, 30, null);
    expect(claimed.files).toEqual([
      { name: 'plot.R', content: Buffer.from('plot(1)'), chunked: null },
      { name: 'data.csv', content: Buffer.from([0, 1, 2, 255]), chunked: null },
    ]);
    expect(await queue.complete(id, 'intruder', ok)).toBe(false);
    expect(
      await dataSource.query('SELECT count(*)::int AS n FROM job_file WHERE job_id = $1', [id]),
    ).toEqual([{ n: 2 }]);
    expect(await queue.complete(id, 'w1', ok)).toBe(true);
    expect(
      await dataSource.query(
        'SELECT application_name, success, type, size, sha256 FROM result WHERE job_id = $1',
        [id],
      ),
    ).toEqual([
      { application_name: 'demo', success: true, type: 'zip', size: '3', sha256: ok.sha256 },
    ]);
    expect(
      await dataSource.query('SELECT count(*)::int AS n FROM job_file WHERE job_id = $1', [id]),
    ).toEqual([{ n: 0 }]);
    // Deleting the job still takes its result with it (ON DELETE CASCADE).
    await dataSource.query('DELETE FROM job WHERE id = $1', [id]);
    expect(await dataSource.query('SELECT job_id FROM result WHERE job_id = $1', [id])).toEqual([]);
  });

  onServer(
    'notifies svc_result_ready with the node and job id only when the result is stored',
    async () => {
      const listener = new Client({ connectionString: database.url ?? '' });
      await listener.connect();
      try {
        const heard: string[] = [];
        listener.on('notification', (message) => heard.push(message.payload ?? ''));
        await listener.query(`LISTEN ${RESULT_READY_CHANNEL}`);
        const refused = await submit();
        const stored = await submit();
        await queue.claim('w1', 2, 30, null);
        expect(await queue.complete(refused, 'intruder', ok)).toBe(false);
        expect(await queue.complete(stored, 'w1', ok)).toBe(true);
        await waitFor(() => Promise.resolve(heard.length > 0), 5000);
        // A round trip on the listening connection delivers anything still in flight.
        await listener.query('SELECT 1');
        // After the sending node's id, so that node knows its own echo.
        expect(heard.map(parseNotification)).toEqual([{ sender: node.id, payload: stored }]);
      } finally {
        await listener.end();
      }
    },
  );

  it('re-queues a job whose lease expired, and the old worker can no longer complete it', async () => {
    const id = await submit();
    await queue.claim('dead', 1, 30, null);
    expect(await queue.heartbeat('dead', [id], 30)).toEqual([id]);
    await dataSource.query(
      `UPDATE job SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    expect(await queue.recoverExpiredLeases(3, 30, deadLetter)).toEqual({
      requeued: 1,
      exhausted: [],
    });
    expect(await row(id)).toMatchObject({ state: 'QUEUED', attempts: 1, lease_owner: null });
    expect(await queue.heartbeat('dead', [id], 30)).toEqual([]);
    await makeClaimable(id);
    const [again] = await queue.claim('alive', 1, 30, null);
    expect(again).toMatchObject({ id, attempts: 2 });
    expect(await queue.complete(id, 'dead', ok)).toBe(false);
    expect(await queue.complete(id, 'alive', ok)).toBe(true);
  });

  it('ends a job out of attempts with its dead-letter result in the supervisor pass itself', async () => {
    const id = await submit();
    await queue.claim('w', 1, 30, null);
    await dataSource.query(
      `UPDATE job SET attempts = 3, lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    const { requeued, exhausted } = await queue.recoverExpiredLeases(3, 30, deadLetter);
    expect(requeued).toBe(0);
    expect(exhausted).toEqual([
      expect.objectContaining({ id, applicationName: 'demo', attempts: 3 }),
    ]);
    // Stored by the pass: no later step is needed, nor can another result replace it.
    expect(await row(id)).toMatchObject({ state: 'DONE', lease_owner: null });
    expect(await storedResult(id)).toEqual({
      success: false,
      text:
        `Job ${id} of application demo, submitted ${exhausted[0].submittedAt.toISOString()}, failed.\n` +
        'dead after 3 attempt(s): the worker running it stopped responding (lease expired)\n',
    });
    expect(await queue.complete(id, 'supervisor', ok)).toBe(false);
  });

  describe('a job whose node stopped responding while it ran (a possible poison job)', () => {
    const poisoned =
      'the job was stopped after the nodes running it stopped responding twice; ' +
      'it may crash or freeze the service';

    /** The lease of the job's running node ran out: the node died or froze. */
    async function loseLease(id: string): Promise<void> {
      await dataSource.query(
        `UPDATE job SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
    }

    async function lostRuns(id: string): Promise<number> {
      const [job] = await dataSource.query<Array<{ lost_runs: number }>>(
        'SELECT lost_runs FROM job WHERE id = $1',
        [id],
      );
      return job.lost_runs;
    }

    async function databaseNow(): Promise<number> {
      const [now] = await dataSource.query<Array<{ t: Date }>>('SELECT clock_timestamp() AS t');
      return new Date(now.t).getTime();
    }

    it('puts it back behind other jobs: not claimable for the delay, the lost run counted', async () => {
      const id = await submit('demo', new Date(Date.now() - 60_000));
      await queue.claim('frozen', 1, 30, null);
      await loseLease(id);
      const before = await databaseNow();
      expect(await queue.recoverExpiredLeases(3, 30, deadLetter)).toEqual({
        requeued: 1,
        exhausted: [],
      });
      const after = await databaseNow();
      expect(await row(id)).toMatchObject({
        state: 'QUEUED',
        attempts: 1,
        lease_owner: null,
        delayed: true,
        last_error: 'the worker running it stopped responding (lease expired)',
      });
      expect(await lostRuns(id)).toBe(1);
      const [job] = await dataSource.query<Array<{ run_after: Date }>>(
        'SELECT run_after FROM job WHERE id = $1',
        [id],
      );
      const runAfter = new Date(job.run_after).getTime();
      expect(runAfter).toBeGreaterThanOrEqual(before + 30_000);
      expect(runAfter).toBeLessThanOrEqual(after + 30_000);

      // The restarted node runs a younger job first, and finds nothing else to run.
      const younger = await submit();
      expect((await queue.claim('restarted', 5, 30, null)).map((j) => j.id)).toEqual([younger]);
      expect(await queue.claim('restarted', 5, 30, null)).toEqual([]);
      await makeClaimable(id);
      expect((await queue.claim('restarted', 5, 30, null))[0]).toMatchObject({ id, attempts: 2 });
    });

    it('dead-letters it when a node running it stops responding a second time, attempts left', async () => {
      const id = await submit();
      await queue.claim('frozen', 1, 30, null);
      await loseLease(id);
      expect(await queue.recoverExpiredLeases(5, 30, deadLetter)).toEqual({
        requeued: 1,
        exhausted: [],
      });
      await makeClaimable(id);
      await queue.claim('restarted', 1, 30, null);
      await loseLease(id);

      expect(await queue.recoverExpiredLeases(5, 30, deadLetter)).toEqual({
        requeued: 0,
        exhausted: [
          expect.objectContaining({
            id,
            applicationName: 'demo',
            attempts: 2,
            lastError: poisoned,
          }),
        ],
      });
      expect(await row(id)).toMatchObject({ state: 'DONE', lease_owner: null });
      expect(await lostRuns(id)).toBe(2);
      expect(await storedResult(id)).toEqual({
        success: false,
        text: expect.stringContaining(`dead after 2 attempt(s): ${poisoned}\n`) as unknown,
      });
    });

    it('ends a job the supervisor of an older version took for a dead letter and did not end', async () => {
      const id = await submit();
      await queue.claim('frozen', 1, 30, null);
      // That supervisor's node died between taking the job and storing its dead letter.
      await dataSource.query(
        `UPDATE job SET lease_owner = 'supervisor', lost_runs = 2, last_error = $2,
                lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id, poisoned],
      );
      // The same reason, and its lost lease is not one of the job's lost runs.
      expect(await queue.recoverExpiredLeases(5, 30, deadLetter)).toEqual({
        requeued: 0,
        exhausted: [expect.objectContaining({ id, attempts: 1, lastError: poisoned })],
      });
      expect(await lostRuns(id)).toBe(2);
      expect(await row(id)).toMatchObject({ state: 'DONE', lease_owner: null });
      expect(await storedResult(id)).toMatchObject({ success: false });
    });

    it('does not count a graceful hand-back at shutdown, nor delay it', async () => {
      const id = await submit();
      await queue.claim('stopping', 1, 30, null);
      expect(await queue.release('stopping', [id])).toBe(1);
      expect(await row(id)).toMatchObject({ state: 'QUEUED', attempts: 0, delayed: false });
      expect(await lostRuns(id)).toBe(0);

      // One lost run, then a hand-back: still one, and the job can be claimed at once.
      await queue.claim('frozen', 1, 30, null);
      await loseLease(id);
      expect(await queue.recoverExpiredLeases(3, 30, deadLetter)).toEqual({
        requeued: 1,
        exhausted: [],
      });
      await makeClaimable(id);
      await queue.claim('stopping', 1, 30, null);
      expect(await queue.release('stopping', [id])).toBe(1);
      expect(await row(id)).toMatchObject({ state: 'QUEUED', attempts: 1, delayed: false });
      expect(await lostRuns(id)).toBe(1);
      expect((await queue.claim('next', 1, 30, null))[0]).toMatchObject({ id, attempts: 2 });
    });
  });

  it('delays a retried job by its back-off and keeps the reason', async () => {
    const id = await submit();
    await queue.claim('w', 1, 30, null);
    expect(await queue.retryLater(id, 'w', 'R could not start', 60_000)).toBe(true);
    expect(await row(id)).toMatchObject({
      state: 'QUEUED',
      delayed: true,
      last_error: 'R could not start',
    });
    expect(await queue.claim('w', 1, 30, null)).toEqual([]);
    await dataSource.query(`UPDATE job SET run_after = now() - interval '1 second' WHERE id = $1`, [
      id,
    ]);
    expect((await queue.claim('w', 1, 30, null))[0]).toMatchObject({ id, attempts: 2 });
  });

  it('releases jobs at shutdown without counting the attempt', async () => {
    const id = await submit();
    await queue.claim('w', 1, 30, null);
    expect(await queue.release('w', [id])).toBe(1);
    expect(await row(id)).toMatchObject({ state: 'QUEUED', attempts: 0 });
  });

  it('deletes results past their retention with their jobs', async () => {
    const id = await submit();
    await queue.claim('w', 1, 30, null);
    await queue.complete(id, 'w', ok);
    expect(await queue.deleteExpiredResults(1)).toBe(0);
    await dataSource.query(
      `UPDATE result SET result_time = now() - interval '2 hours' WHERE job_id = $1`,
      [id],
    );
    expect(await queue.deleteExpiredResults(0)).toBe(0);
    expect(await queue.deleteExpiredResults(1)).toBe(1);
    expect(await dataSource.query('SELECT id FROM job WHERE id = $1', [id])).toEqual([]);
  });

  it("applies an application's own retention before the default", async () => {
    const id = await submit();
    await queue.claim('w', 1, 30, null);
    await queue.complete(id, 'w', ok);
    await dataSource.query(
      `UPDATE result SET result_time = now() - interval '2 hours' WHERE job_id = $1`,
      [id],
    );
    const [{ application_name: app }] = await dataSource.query<Array<{ application_name: string }>>(
      'SELECT application_name FROM job WHERE id = $1',
      [id],
    );
    // Kept by its application's 0 (and by a longer period) although the default would delete it.
    expect(await queue.deleteExpiredResults(1, { [app]: 0 })).toBe(0);
    expect(await queue.deleteExpiredResults(1, { [app]: 3 })).toBe(0);
    // Deleted by its application's period although the default keeps results.
    expect(await queue.deleteExpiredResults(0, { other: 1, [app]: 1 })).toBe(1);
  });

  describe('QueueNotifier.onResultReady', () => {
    let events: DatabaseEvents;
    let notifier: QueueNotifier;

    beforeEach(() => {
      events = new DatabaseEvents(
        database.url
          ? { kind: 'server', url: database.url, listenUrl: database.url }
          : { kind: 'embedded', socketDirectory: database.dataDir },
        node,
        dataSource,
      );
      notifier = new QueueNotifier(events);
    });

    afterEach(async () => {
      notifier.onApplicationShutdown();
      await events.onApplicationShutdown();
    });

    it('reports results stored in this process, until unsubscribed, past a failing listener', () => {
      const first: string[] = [];
      const second: string[] = [];
      notifier.onResultReady(() => {
        throw new Error('a broken waiter');
      });
      const unsubscribe = notifier.onResultReady((id) => first.push(id));
      notifier.onResultReady((id) => second.push(id));
      notifier.resultStored('a');
      unsubscribe();
      notifier.resultStored('b');
      expect(first).toEqual(['a']);
      expect(second).toEqual(['a', 'b']);
    });

    onServer(
      'reports results stored by other nodes through LISTEN, and its own only once',
      async () => {
        const heard: string[] = [];
        notifier.onResultReady((id) => heard.push(id));
        await notifier.listen();
        const [mine, theirs] = [await submit(), await submit()];
        await queue.claim('w', 2, 30, null);
        // This node stores one result and reports it at once; its NOTIFY echo is not reported again.
        expect(await queue.complete(mine, 'w', ok)).toBe(true);
        notifier.resultStored(mine);
        expect(heard).toEqual([mine]);
        // Another node stored this one: only its NOTIFY tells this node (delivered in commit order).
        const otherNode = new QueueRepository(dataSource, new NodeIdentity());
        expect(await otherNode.complete(theirs, 'w', ok)).toBe(true);
        await waitFor(() => Promise.resolve(heard.length > 1), 5000);
        expect(heard).toEqual([mine, theirs]);
      },
    );
  });

  /**
   * A node connected to the server directly claims on a connection of its own, whose session
   * plans the claim once (force_generic_plan): the same jobs in the same order as the pooled
   * path, a dedicated slot's claim only its application's, and a lost connection replaced.
   */
  describe("the claim's own connection", () => {
    let direct: QueueRepository;

    beforeAll(() => {
      direct = new QueueRepository(dataSource, node, loadConfig(testEnvironment(database)));
    });

    afterAll(async () => {
      await direct.onModuleDestroy();
    });

    async function claimBackends(): Promise<Array<{ pid: number; query: string }>> {
      return dataSource.query(
        `SELECT pid, query FROM pg_stat_activity
          WHERE application_name = $1 AND datname = current_database()`,
        [CLAIM_APPLICATION_NAME],
      );
    }

    onServer(
      'claims by priority and submission order, a dedicated slot only its application',
      async () => {
        const start = Date.now();
        const older = await submit('alpha', new Date(start - 2000));
        const newer = await submit('alpha', new Date(start - 1000));
        const urgent = await submit('alpha', new Date(start));
        await dataSource.query('UPDATE job SET priority = 5 WHERE id = $1', [urgent]);
        const other = await submit('beta', new Date(start - 3000));
        // Several times, so that PostgreSQL's plan cache has long passed its custom plans.
        for (let i = 0; i < 7; i++) {
          expect(await direct.claim('none', 1, 30, 'gamma')).toEqual([]);
        }
        expect((await direct.claim('w', 2, 30, 'alpha')).map((job) => job.id)).toEqual([
          urgent,
          older,
        ]);
        expect((await direct.claim('w', 5, 30, null)).map((job) => job.id).sort()).toEqual(
          [newer, other].sort(),
        );
        const backends = await claimBackends();
        expect(backends).toHaveLength(1);
        expect(backends[0].query).toMatch(/^WITH RECURSIVE queued_apps/);
      },
    );

    onServer('opens another connection when the server ended its own', async () => {
      await direct.claim('w', 1, 30, null);
      const [before] = await claimBackends();
      await dataSource.query('SELECT pg_terminate_backend($1)', [before.pid]);
      const id = await submit('alpha');
      // The claim that meets the ended connection fails; the worker claims again on its next
      // wake-up, on a new connection.
      let claimed: string[] = [];
      await waitFor(async () => {
        claimed = await direct.claim('w', 1, 30, null).then(
          (jobs) => jobs.map((job) => job.id),
          () => [],
        );
        return claimed.length > 0;
      }, 5000);
      expect(claimed).toEqual([id]);
      const after = await claimBackends();
      expect(after).toHaveLength(1);
      expect(after[0].pid).not.toBe(before.pid);
    });
  });
});
