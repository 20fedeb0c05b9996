import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { resultData } from '../../src/job-core/job-result';
import { DirectStarts, HeldSlot, SlotHolder } from '../../src/queue/direct-starts';
import { JOB_QUEUED_CHANNEL, JOB_STARTED_CHANNEL } from '../../src/queue/queue-channels';
import { QueueRepository } from '../../src/queue/queue.repository';
import { NodeIdentity } from '../../src/storage/node-identity';
import { SERVER_DATABASE_URL, TestDatabase, waitFor } from '../support/test-service';
import { MigratedDatabase, openMigratedDatabase } from '../support/migrated-database';
import type { ClaimedJob, JobKind } from '../../src/queue/queue.types';

const onServer = SERVER_DATABASE_URL ? it : it.skip;

/**
 * One worker's free slots as WorkerService offers them (the worker itself is exercised by every
 * end-to-end spec): what the submitting statement decided is what the slot is told.
 */
class RecordingSlots implements SlotHolder {
  readonly started: ClaimedJob[] = [];
  readonly released: string[] = [];
  readonly asked: Array<{ jobId: string; applicationName: string; kind: JobKind }> = [];

  constructor(
    private free: number,
    private readonly kinds: readonly JobKind[] = ['script'],
  ) {}

  hold(jobId: string, applicationName: string, kind: JobKind): HeldSlot | null {
    this.asked.push({ jobId, applicationName, kind });
    if (this.free === 0 || !this.kinds.includes(kind)) {
      return null;
    }
    this.free -= 1;
    return {
      owner: 'node-a',
      leaseSeconds: 30,
      kinds: this.kinds,
      start: (job) => this.started.push(job),
      release: () => {
        this.free += 1;
        this.released.push(jobId);
      },
    };
  }
}

/** The submitting statement that starts a job in a free slot of its node, against PostgreSQL. */
describe('starting a job where it is submitted', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let opened: MigratedDatabase;
  let queue: QueueRepository;
  let directStarts: DirectStarts;

  beforeAll(async () => {
    opened = await openMigratedDatabase();
    ({ database, dataSource } = opened);
    directStarts = new DirectStarts();
    queue = new QueueRepository(dataSource, new NodeIdentity(), undefined, directStarts);
  });

  afterAll(() => opened.drop());

  beforeEach(async () => {
    await dataSource.query('DELETE FROM job');
  });

  function offer(slots: RecordingSlots): RecordingSlots {
    directStarts.offer(slots);
    return slots;
  }

  async function submit(
    options: {
      applicationName?: string;
      kind?: JobKind;
      startHere?: boolean;
      maxQueued?: number | null;
    } = {},
  ) {
    const id = randomUUID();
    const outcome = await queue.enqueue(
      {
        id,
        applicationName: options.applicationName ?? 'demo',
        kind: options.kind ?? 'script',
        meta: { zeta: 'z', purpose: 'test', a: 'a' },
        source: 'rest',
        submittedAt: new Date(),
        files: [{ name: 'job.R', content: Buffer.from('cat(1)') }],
        callback: { url: 'http://127.0.0.1:9/hook', linksBase: 'http://127.0.0.1:9' },
      },
      { startHere: options.startHere ?? true, maxQueued: options.maxQueued ?? null },
    );
    return { id, outcome };
  }

  async function row(id: string): Promise<Record<string, unknown>> {
    const rows = await dataSource.query<Array<Record<string, unknown>>>(
      `SELECT state, attempts, lease_owner, started_at IS NOT NULL AS started,
              lease_expires_at > now() + interval '20 seconds' AS leased
         FROM job WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  it('stores the job running under the free slot’s lease when nothing is queued, and hands it over', async () => {
    const slots = offer(new RecordingSlots(1));
    const { id, outcome } = await submit();
    expect(outcome).toEqual({ stored: true, startedHere: true });
    expect(await row(id)).toEqual({
      state: 'RUNNING',
      attempts: 1,
      lease_owner: 'node-a',
      started: true,
      leased: true,
    });
    expect(slots.released).toEqual([]);
    expect(slots.started).toHaveLength(1);
    expect(slots.started[0]).toMatchObject({
      id,
      applicationName: 'demo',
      kind: 'script',
      attempts: 1,
      meta: { zeta: 'z', purpose: 'test', a: 'a' },
      hasCallback: true,
      files: [{ name: 'job.R', chunked: null }],
    });
    expect(slots.started[0].files[0].content.toString()).toBe('cat(1)');
    // The meta as a claim returns it (and the job sees it): in the stored order, not as sent.
    const [stored] = await dataSource.query<Array<{ meta: Record<string, string> }>>(
      'SELECT meta FROM job WHERE id = $1',
      [id],
    );
    expect(Object.keys(slots.started[0].meta)).toEqual(Object.keys(stored.meta));
    expect(Object.keys(slots.started[0].meta)).not.toEqual(['zeta', 'purpose', 'a']);
    // Nobody claims it: it is not queued.
    expect(await queue.claim('node-b', 5, 30, null)).toEqual([]);
    // Its slot's lease holds for its result, as a claimed job's does.
    const ok = resultData(true, 'zip', 'application/zip', Buffer.from('zip'));
    expect(await queue.complete(id, 'node-b', ok)).toBe(false);
    expect(await queue.complete(id, 'node-a', ok)).toBe(true);
  });

  it('queues the job behind a queued job of the slot’s kinds, of any application', async () => {
    const slots = offer(new RecordingSlots(0));
    const { id: ahead } = await submit({ applicationName: 'other' });
    const free = offer(new RecordingSlots(1));
    const { id, outcome } = await submit();
    expect(outcome).toEqual({ stored: true, startedHere: false });
    expect(await row(id)).toMatchObject({ state: 'QUEUED', attempts: 0, lease_owner: null });
    expect(free.started).toEqual([]);
    expect(free.released).toEqual([id]);
    expect(slots.asked.map((a) => a.jobId)).toEqual([ahead]);
    // The claim then takes both, in fair turn.
    const claimed = await queue.claim('node-a', 2, 30, null);
    expect(claimed.map((job) => job.id).sort()).toEqual([ahead, id].sort());
  });

  it('is not held back by queued jobs of other kinds, nor by jobs due later', async () => {
    offer(new RecordingSlots(0));
    await submit({ kind: 'script' });
    const { id: later } = await submit({ kind: 'json' });
    await dataSource.query(`UPDATE job SET run_after = now() + interval '1 hour' WHERE id = $1`, [
      later,
    ]);
    const slots = offer(new RecordingSlots(1, ['xml', 'json']));
    const { id, outcome } = await submit({ kind: 'json' });
    expect(outcome.stored && outcome.startedHere).toBe(true);
    expect(slots.started.map((job) => job.id)).toEqual([id]);
  });

  it('queues the job when no slot is free, when not asked to start it, and under maxQueuedJobs', async () => {
    const slots = offer(new RecordingSlots(0));
    const full = await submit();
    expect(full.outcome).toEqual({ stored: true, startedHere: false });
    await dataSource.query('DELETE FROM job');
    const idle = offer(new RecordingSlots(2));
    const notAsked = await submit({ startHere: false });
    // The admission under maxQueuedJobs is a transaction of its own: committed after the
    // statement, so the job is never started from inside it.
    const admitted = await submit({ applicationName: 'capped', maxQueued: 10 });
    expect([notAsked.outcome, admitted.outcome]).toEqual([
      { stored: true, startedHere: false },
      { stored: true, startedHere: false },
    ]);
    expect(slots.asked).toHaveLength(1);
    expect(idle.asked).toEqual([]);
    expect(await row(admitted.id)).toMatchObject({ state: 'QUEUED' });
  });

  onServer('tells other nodes that the job started, not that it was queued', async () => {
    const listener = new Client({ connectionString: database.url ?? undefined });
    await listener.connect();
    const heard: Array<{ channel: string; payload: string }> = [];
    try {
      listener.on('notification', (message) =>
        heard.push({ channel: message.channel, payload: message.payload ?? '' }),
      );
      await listener.query(`LISTEN ${JOB_STARTED_CHANNEL}`);
      await listener.query(`LISTEN ${JOB_QUEUED_CHANNEL}`);
      offer(new RecordingSlots(1));
      const started = await submit();
      const queued = await submit();
      await waitFor(() => Promise.resolve(heard.length >= 2), 10_000, 'both notifications');
      expect(heard.map((h) => h.channel)).toEqual([JOB_STARTED_CHANNEL, JOB_QUEUED_CHANNEL]);
      expect(heard[0].payload.endsWith(started.id)).toBe(true);
      expect(heard[1].payload.endsWith('script')).toBe(true);
      expect(await row(queued.id)).toMatchObject({ state: 'QUEUED' });
    } finally {
      await listener.end();
    }
  });
});
