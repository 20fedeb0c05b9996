import { randomUUID } from 'node:crypto';
import { MessageEvent } from '@nestjs/common';
import { Subscription } from 'rxjs';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { JobLogRepository } from '../../src/job-log/job-log.repository';
import { JobLogService } from '../../src/jobs/job-log.service';
import { resultData } from '../../src/job-core/job-result';
import { JobRecordsRepository } from '../../src/queue/job-records.repository';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { QueueRepository } from '../../src/queue/queue.repository';
import { ResultRepository } from '../../src/results/result.repository';
import { DatabaseEvents } from '../../src/storage/database-events.service';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { NodeIdentity } from '../../src/storage/node-identity';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  sleep,
  TestDatabase,
  testEnvironment,
  waitFor,
} from '../support/test-service';

/** Another node's NOTIFY needs the server; PGlite is one process with no other nodes. */
const onServer = SERVER_DATABASE_URL ? it : it.skip;

/**
 * The job log's live stream on one node, woken by the appends of a worker on another: the
 * append's own NOTIFY on the node's LISTEN connection, and no query in between.
 */
describe('job log live stream across nodes (real database)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  let events: DatabaseEvents;
  let notifier: QueueNotifier;
  let subscription: Subscription | null = null;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    ({ dataSource, close } = await openDatabaseForCli(
      loadConfig(testEnvironment(database)),
      DATABASE_SCHEMA,
    ));
  });
  afterAll(async () => {
    await close();
    await database.drop();
  });
  afterEach(async () => {
    subscription?.unsubscribe();
    notifier?.onApplicationShutdown();
    await events?.onApplicationShutdown();
  });

  onServer("follows lines another node's worker appends, and ends with its result", async () => {
    const records = new JobRecordsRepository(dataSource);
    // The API node: its own LISTEN connection.
    const url = database.url!;
    events = new DatabaseEvents(
      { kind: 'server', url, listenUrl: url },
      new NodeIdentity(),
      dataSource,
    );
    notifier = new QueueNotifier(events);
    const logs = new JobLogRepository(dataSource, notifier);
    const reads = jest.spyOn(logs, 'readTail');
    const service = new JobLogService(
      logs,
      records,
      new ResultRepository(dataSource, records),
      notifier,
    );
    // The worker node: another node id, no LISTEN connection of its own needed to send.
    const worker = new NodeIdentity();
    const workerEvents = new DatabaseEvents(
      { kind: 'server', url, listenUrl: url },
      worker,
      dataSource,
    );
    const workerLog = new JobLogRepository(dataSource, new QueueNotifier(workerEvents));
    const queue = new QueueRepository(dataSource, worker);
    const jobId = randomUUID();
    await queue.enqueue({
      id: jobId,
      applicationName: 'demo',
      kind: 'script',
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [],
    });
    expect(await queue.claim('w', 1, 30, null)).toHaveLength(1);

    // The node listens from its start; the stream's channels are added to the connection.
    await notifier.listen();
    const seen: MessageEvent[] = [];
    let ended = false;
    subscription = (await service.follow('demo', jobId, undefined)).asObservable().subscribe({
      next: (event) => seen.push(event),
      complete: () => (ended = true),
    });
    await notifier.listen();
    await waitFor(() => Promise.resolve(reads.mock.calls.length === 1), 5000, 'the first read');

    await workerLog.append(jobId, [
      { seq: 0, stream: 'stdout', time: new Date(), line: 'first line' },
      { seq: 1, stream: 'stderr', time: new Date(), line: 'to stderr' },
    ]);
    await waitFor(() => Promise.resolve(seen.length === 2), 5000, 'the two lines');
    expect(seen.map((e) => [e.type, e.id])).toEqual([
      ['line', '0'],
      ['line', '1'],
    ]);
    expect(reads).toHaveBeenCalledTimes(2);
    // Quiet: no read at all (the stream used to look every 250 ms).
    await sleep(1000);
    expect(reads).toHaveBeenCalledTimes(2);
    expect(ended).toBe(false);

    // The result, stored by the worker node: the end, after every line.
    await workerLog.append(jobId, [
      { seq: 2, stream: 'stdout', time: new Date(), line: 'last line' },
    ]);
    expect(
      await queue.complete(
        jobId,
        'w',
        resultData(true, 'zip', 'application/zip', Buffer.from('z')),
      ),
    ).toBe(true);
    await waitFor(() => Promise.resolve(ended), 5000, 'the end');
    expect(seen.map((e) => [e.type, e.id])).toEqual([
      ['line', '0'],
      ['line', '1'],
      ['line', '2'],
      ['end', '2'],
    ]);
    expect(seen[3].data).toEqual({ success: true, type: 'zip', cancelled: false });
    await workerEvents.onApplicationShutdown();
  });

  onServer(
    'on the node that appends, reads once per batch: at once, and not again on the echo',
    async () => {
      const records = new JobRecordsRepository(dataSource);
      const url = database.url!;
      const node = new NodeIdentity();
      events = new DatabaseEvents({ kind: 'server', url, listenUrl: url }, node, dataSource);
      notifier = new QueueNotifier(events);
      const logs = new JobLogRepository(dataSource, notifier);
      const reads = jest.spyOn(logs, 'readTail');
      const service = new JobLogService(
        logs,
        records,
        new ResultRepository(dataSource, records),
        notifier,
      );
      const queue = new QueueRepository(dataSource, node);
      const jobId = randomUUID();
      await queue.enqueue({
        id: jobId,
        applicationName: 'demo',
        kind: 'script',
        meta: {},
        source: 'rest',
        submittedAt: new Date(),
        files: [],
      });
      await notifier.listen();
      const seen: MessageEvent[] = [];
      subscription = (await service.follow('demo', jobId, undefined))
        .asObservable()
        .subscribe((event) => seen.push(event));
      await notifier.listen();
      await waitFor(() => Promise.resolve(reads.mock.calls.length === 1), 5000, 'the first read');
      await logs.append(jobId, [{ seq: 0, stream: 'stdout', time: new Date(), line: 'mine' }]);
      // Delivered in-process when the statement returned: the read has started already.
      expect(reads).toHaveBeenCalledTimes(2);
      await waitFor(() => Promise.resolve(seen.length === 1), 5000, 'the line');
      // The NOTIFY comes back over LISTEN with this node's id, and is not delivered again.
      await sleep(500);
      expect(reads).toHaveBeenCalledTimes(2);
      // A job that is gone writes nothing and notifies no one.
      await dataSource.query('DELETE FROM job WHERE id = $1', [jobId]);
      await logs.append(jobId, [{ seq: 1, stream: 'stdout', time: new Date(), line: 'late' }]);
      await sleep(500);
      expect(reads).toHaveBeenCalledTimes(2);
    },
  );
});
