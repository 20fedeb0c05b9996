import { Test, TestingModule } from '@nestjs/testing';
import { configProviders } from '../../src/config/config.module';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { QueueRepository } from '../../src/queue/queue.repository';
import { CallbackJobsRepository } from '../../src/queue/callback-jobs.repository';
import { resultData } from '../../src/job-core/job-result';
import { JOB_EXECUTOR, type JobExecutor } from '../../src/queue/queue.types';
import { NodeIdentity } from '../../src/storage/node-identity';
import { WorkerService } from '../../src/worker/worker.service';
import { MigratedDatabase, openMigratedDatabase, queueAndClaim } from '../support/executor-harness';
import { inProcessEvents } from '../support/in-process-events';

/**
 * The worker's supervisor pass against a real database (server or PGlite): a job whose worker
 * died during its last attempt ends with a dead-letter result, not in RUNNING for ever, and so
 * does a job whose nodes stopped responding twice while they ran it (a possible poison job).
 */
describe('WorkerService supervisor pass', () => {
  let db: MigratedDatabase;
  let queue: QueueRepository;

  beforeAll(async () => {
    db = await openMigratedDatabase({ MAX_ATTEMPTS: '3', POLL_INTERVAL_MS: '100000' });
    queue = new QueueRepository(db.dataSource, new NodeIdentity());
  });

  afterAll(async () => {
    await db?.close();
  });

  /**
   * Starts a worker node whose start-up runs the first supervisor pass before it claims
   * anything, stops it, and returns the ids whose results it reported stored.
   */
  async function runSupervisorPass(): Promise<string[]> {
    // This node has nothing to run: the job is not queued, so its executor is never asked.
    const idle: JobExecutor = {
      execute: () => Promise.reject(new Error('no job should run in this test')),
    };
    const module: TestingModule = await Test.createTestingModule({
      providers: [
        WorkerService,
        ...configProviders(db.config),
        { provide: QueueRepository, useValue: queue },
        // Results stored are reported within this process (no other node listens here).
        {
          provide: QueueNotifier,
          useValue: new QueueNotifier(inProcessEvents()),
        },
        { provide: JOB_EXECUTOR, useValue: idle },
        NodeIdentity,
      ],
    }).compile();
    const reported: string[] = [];
    module.get(QueueNotifier).onResultReady((jobId) => reported.push(jobId));
    try {
      await module.init();
    } finally {
      await module.close();
    }
    return reported;
  }

  it('stores a dead-letter result for a job whose lease expired with no attempt left', async () => {
    const { id, submittedAt } = await queueAndClaim(queue, {
      applicationName: 'demo',
      kind: 'script',
      files: [],
    });
    // Its third attempt's worker stopped answering: the lease ran out.
    await db.dataSource.query(
      `UPDATE job SET attempts = 3, lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );

    const reported = await runSupervisorPass();

    const [job] = await db.dataSource.query<Array<{ state: string; lease_owner: string | null }>>(
      'SELECT state, lease_owner FROM job WHERE id = $1',
      [id],
    );
    expect(job).toEqual({ state: 'DONE', lease_owner: null });
    const [result] = await db.dataSource.query<
      Array<{ success: boolean; type: string; data: Buffer }>
    >('SELECT success, type, data FROM result WHERE job_id = $1', [id]);
    expect(result).toMatchObject({ success: false, type: 'txt' });
    expect(result.data.toString()).toBe(
      `Job ${id} of application demo, submitted ${submittedAt.toISOString()}, failed.\n` +
        'The job could not be delivered to R after 3 attempt(s): ' +
        'the worker running it stopped responding (lease expired)\n',
    );
    expect(reported).toEqual([id]);
  });

  it('puts back a job whose node stopped responding once, and does not claim it before a lease', async () => {
    const { id } = await queueAndClaim(queue, {
      applicationName: 'demo',
      kind: 'script',
      files: [],
    });
    await db.dataSource.query(
      `UPDATE job SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    const clock = async (): Promise<number> => {
      const [now] = await db.dataSource.query<Array<{ t: Date }>>('SELECT clock_timestamp() AS t');
      return new Date(now.t).getTime();
    };

    // A restarting node: its start-up pass puts the job back, then it claims what it may run.
    const before = await clock();
    expect(await runSupervisorPass()).toEqual([]);
    const after = await clock();

    const [job] = await db.dataSource.query<
      Array<{
        state: string;
        attempts: number;
        lost_runs: number;
        last_error: string;
        run_after: Date;
      }>
    >('SELECT state, attempts, lost_runs, last_error, run_after FROM job WHERE id = $1', [id]);
    // Not claimed again (the idle executor would have failed the attempt and counted it).
    expect(job).toMatchObject({
      state: 'QUEUED',
      attempts: 1,
      lost_runs: 1,
      last_error: 'the worker running it stopped responding (lease expired)',
    });
    const lease = db.config.leaseSeconds * 1000;
    expect(new Date(job.run_after).getTime()).toBeGreaterThanOrEqual(before + lease);
    expect(new Date(job.run_after).getTime()).toBeLessThanOrEqual(after + lease);
    await db.dataSource.query('DELETE FROM job WHERE id = $1', [id]);
  });

  it('stores a dead-letter result for a job whose second node stopped responding, attempts left', async () => {
    const { id, submittedAt } = await queueAndClaim(queue, {
      applicationName: 'demo',
      kind: 'script',
      files: [],
    });
    // A node running it froze once before (its first lost run); now the second one, on
    // attempt 2 of 3, stopped answering too.
    await db.dataSource.query(
      `UPDATE job SET attempts = 2, lost_runs = 1, lease_expires_at = now() - interval '1 second'
        WHERE id = $1`,
      [id],
    );

    const reported = await runSupervisorPass();

    const [job] = await db.dataSource.query<
      Array<{ state: string; lease_owner: string | null; lost_runs: number }>
    >('SELECT state, lease_owner, lost_runs FROM job WHERE id = $1', [id]);
    expect(job).toEqual({ state: 'DONE', lease_owner: null, lost_runs: 2 });
    const [result] = await db.dataSource.query<
      Array<{ success: boolean; type: string; data: Buffer }>
    >('SELECT success, type, data FROM result WHERE job_id = $1', [id]);
    expect(result).toMatchObject({ success: false, type: 'txt' });
    expect(result.data.toString()).toBe(
      `Job ${id} of application demo, submitted ${submittedAt.toISOString()}, failed.\n` +
        'The job could not be delivered to R after 2 attempt(s): ' +
        'the job was stopped after the nodes running it stopped responding twice; ' +
        'it may crash or freeze the service\n',
    );
    expect(reported).toEqual([id]);
  });

  it('puts back a callback job whose node died mid-attempt, due at once, with no dead letter', async () => {
    const { id } = await queueAndClaim(queue, {
      applicationName: 'demo',
      kind: 'script',
      files: [],
    });
    await db.dataSource.query(
      `UPDATE job SET callback_url = 'https://hooks.example.com/a' WHERE id = $1`,
      [id],
    );
    expect(
      await queue.complete(
        id,
        'executor-test',
        resultData(true, 'txt', 'text/plain', Buffer.from('ok')),
      ),
    ).toBe(true);
    const [callbackJob] = await new CallbackJobsRepository(db.dataSource).claim(
      'dead-node',
      16,
      60,
    );
    expect(callbackJob.callback?.jobId).toBe(id);
    // Its node stopped answering during an attempt, with more attempts behind it than
    // MAX_ATTEMPTS (3) allows an R job: the lease ran out.
    await db.dataSource.query(
      `UPDATE job SET attempts = 10, lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [callbackJob.id],
    );

    const reported = await runSupervisorPass();

    const [job] = await db.dataSource.query<
      Array<{ state: string; lease_owner: string | null; due: boolean }>
    >('SELECT state, lease_owner, run_after <= now() AS due FROM job WHERE id = $1', [
      callbackJob.id,
    ]);
    expect(job).toEqual({ state: 'QUEUED', lease_owner: null, due: true });
    expect(
      await db.dataSource.query('SELECT job_id FROM result WHERE job_id = $1', [callbackJob.id]),
    ).toEqual([]);
    // The attempt it lost is not counted on the callback.
    expect(
      await db.dataSource.query('SELECT state, attempts FROM job_callback WHERE job_id = $1', [id]),
    ).toEqual([{ state: 'pending', attempts: 0 }]);
    expect(reported).toEqual([]);
    await db.dataSource.query('DELETE FROM job WHERE id = $1', [id]);
    expect(await db.dataSource.query('SELECT id FROM job WHERE id = $1', [callbackJob.id])).toEqual(
      [],
    );
  });
});
