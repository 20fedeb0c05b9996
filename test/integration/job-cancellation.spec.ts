import { randomUUID } from 'node:crypto';
import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { JobCancellationService } from '../../src/jobs/job-cancellation.service';
import { JobKind } from '../../src/queue/queue.types';
import { JobRecordsRepository } from '../../src/queue/job-records.repository';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { NodeIdentity } from '../../src/storage/node-identity';
import { inProcessEvents } from '../support/in-process-events';
import { QueueRepository } from '../../src/queue/queue.repository';
import { ResultRepository } from '../../src/results/result.repository';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';

describe('JobCancellationService (real database)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  let cancellation: JobCancellationService;
  let queue: QueueRepository;
  let jobs: JobRecordsRepository;
  let results: ResultRepository;
  // The real notifier; with an embedded target it reports within the process only.
  const node = new NodeIdentity();
  const notifier = new QueueNotifier(inProcessEvents(undefined, node));
  const reported: string[] = [];
  notifier.onResultReady((jobId) => reported.push(jobId));

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    const config = loadConfig(testEnvironment(database));
    ({ dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA));
    queue = new QueueRepository(dataSource, node);
    const module = await Test.createTestingModule({
      providers: [
        JobCancellationService,
        { provide: QueueRepository, useValue: queue },
        { provide: QueueNotifier, useValue: notifier },
      ],
    }).compile();
    cancellation = module.get(JobCancellationService);
    jobs = new JobRecordsRepository(dataSource);
    results = new ResultRepository(dataSource, jobs);
  });
  afterAll(async () => {
    await close();
    await database.drop();
  });

  async function newJob(applicationName = 'demo'): Promise<string> {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName,
      kind: JobKind.SCRIPT,
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [{ name: 'job.R', content: Buffer.from('Sys.sleep(1)\n') }],
    });
    return id;
  }

  it('a queued job: stopped, DONE with the cancellation result, never claimed, reported', async () => {
    const id = await newJob();
    expect(await cancellation.cancel('demo', id, 'alice')).toBe('stopped');
    const job = await jobs.findOne('demo', id);
    expect(job).toMatchObject({ state: 'DONE', cancelledBy: 'alice' });
    const result = await results.findWithData('demo', id);
    expect(result).toMatchObject({ success: false, type: 'txt' });
    expect(result?.data.toString()).toBe(
      `Job ${id} of application demo was cancelled by alice at ${job?.cancelledAt?.toISOString()}.\n`,
    );
    expect(await queue.claim('w', 10, 30, null)).toEqual([]);
    expect(reported).toContain(id);
  });

  it('a running job: stopping; its worker can no longer heartbeat or store a result', async () => {
    const id = await newJob();
    const [claimed] = await queue.claim('worker-1', 1, 30, null);
    expect(claimed.id).toBe(id);
    expect(await cancellation.cancel('demo', id, null)).toBe('stopping');
    expect((await jobs.findOne('demo', id))?.cancelledBy).toBe('anonymous');
    // The heartbeat is the fallback signal: the job is no longer held.
    expect(await queue.heartbeat('worker-1', [id], 30)).toEqual([]);
    expect(
      await queue.complete(id, 'worker-1', {
        success: true,
        type: 'zip',
        contentType: 'application/zip',
        data: Buffer.from('late'),
        sha256: '',
      }),
    ).toBe(false);
    expect((await results.findWithData('demo', id))?.type).toBe('txt');
  });

  it('a finished job is left alone; an unknown job or another application is unknown', async () => {
    const id = await newJob();
    expect(await cancellation.cancel('demo', id, 'alice')).toBe('stopped');
    expect(await cancellation.cancel('demo', id, 'bob')).toBe('finished');
    expect((await jobs.findOne('demo', id))?.cancelledBy).toBe('alice');
    expect(await cancellation.cancel('demo', randomUUID(), 'alice')).toBe('unknown');
    const other = await newJob('other');
    expect(await cancellation.cancel('demo', other, 'alice')).toBe('unknown');
    expect((await jobs.findOne('other', other))?.state).toBe('QUEUED');
  });
});
