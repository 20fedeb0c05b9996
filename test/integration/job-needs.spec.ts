import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { resultData } from '../../src/job-core/job-result';
import { JOB_QUEUED_CHANNEL } from '../../src/queue/queue-channels';
import { completeInOne } from '../../src/queue/queue-completion';
import { QueueRepository } from '../../src/queue/queue.repository';
import type { JobKind, JobNeed } from '../../src/queue/queue.types';
import { NodeIdentity } from '../../src/storage/node-identity';
import { notificationPrefix } from '../../src/storage/database-events.service';
import { MigratedDatabase, openMigratedDatabase } from '../support/migrated-database';
import { SERVER_DATABASE_URL, waitFor } from '../support/test-service';

/** Two transactions at once need the server; PGlite has one connection. */
const onServer = SERVER_DATABASE_URL ? it : it.skip;

const ok = resultData(true, 'json', 'application/json', Buffer.from('{"v":1}'));
const failed = resultData(false, 'txt', 'text/plain', Buffer.from('it failed'));

/** Jobs that wait for others (queue-needs.ts): released or cancelled by the statements that end a job. */
describe('jobs waiting for jobs', () => {
  let dataSource: DataSource;
  let opened: MigratedDatabase;
  let queue: QueueRepository;
  const node = new NodeIdentity();
  const sender = notificationPrefix(node.id);

  beforeAll(async () => {
    opened = await openMigratedDatabase();
    ({ dataSource } = opened);
    queue = new QueueRepository(dataSource, node);
  });

  afterAll(() => opened.drop());

  async function submit(needs: JobNeed[] = [], kind: JobKind = 'script'): Promise<string> {
    const id = randomUUID();
    await queue.enqueue({
      id,
      applicationName: 'demo',
      kind,
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [],
      needs,
    });
    return id;
  }

  const need = (jobId: string, name: string, required = true): JobNeed => ({
    jobId,
    name,
    required,
  });

  async function stateOf(id: string): Promise<{ state: string; due: boolean; cancelled: boolean }> {
    const [row] = await dataSource.query<
      Array<{ state: string; due: boolean; cancelled: boolean }>
    >(
      `SELECT state, run_after <= now() AS due, cancelled_at IS NOT NULL AS cancelled
         FROM job WHERE id = $1`,
      [id],
    );
    return row;
  }

  it('releases a job when the last job it needs ends, and not before', async () => {
    const a = await submit();
    const b = await submit();
    const c = await submit([need(a, 'a'), need(b, 'b')]);
    expect(await stateOf(c)).toEqual({ state: 'QUEUED', due: false, cancelled: false });
    expect(await queue.complete(a, null, ok)).toBe(true);
    expect((await stateOf(c)).due).toBe(false);
    expect(await queue.complete(b, null, ok)).toBe(true);
    expect(await stateOf(c)).toEqual({ state: 'QUEUED', due: true, cancelled: false });
    expect(
      (await queue.neededResults(c)).map((r) => [r.name, r.succeeded, String(r.data)]),
    ).toEqual([
      ['a', true, '{"v":1}'],
      ['b', true, '{"v":1}'],
    ]);
  });

  it('cancels the jobs that required a failed one, and theirs; runs those that did not', async () => {
    const a = await submit();
    const b = await submit([need(a, 'a')]);
    const c = await submit([need(b, 'b')]);
    const d = await submit([need(a, 'a', false)]);
    expect(await queue.complete(a, null, failed)).toBe(true);
    expect(await stateOf(b)).toEqual({ state: 'DONE', due: false, cancelled: true });
    expect(await stateOf(c)).toEqual({ state: 'DONE', due: false, cancelled: true });
    expect(await stateOf(d)).toEqual({ state: 'QUEUED', due: true, cancelled: false });
    const [text] = await dataSource.query<Array<{ text: string }>>(
      `SELECT convert_from(data, 'UTF8') AS text FROM result WHERE job_id = $1`,
      [c],
    );
    expect(text.text).toBe(
      `Job ${c} of application demo was cancelled: a job it needs (b) did not succeed.\n`,
    );
    expect((await queue.neededResults(d)).map((r) => [r.name, r.succeeded])).toEqual([
      ['a', false],
    ]);
  });

  it('counts a cancelled job as a failed one', async () => {
    const a = await submit();
    const b = await submit([need(a, 'a')]);
    expect(await queue.cancel('demo', a, 'user:alice', new Date(), failed)).toBe('QUEUED');
    expect(await stateOf(b)).toEqual({ state: 'DONE', due: false, cancelled: true });
  });

  it('counts a needed job that ends again (an admin retry) once', async () => {
    const a = await submit();
    const b = await submit();
    const c = await submit([need(a, 'a', false), need(b, 'b')]);
    expect(await queue.complete(a, null, failed)).toBe(true);
    await dataSource.query(`UPDATE job SET state = 'QUEUED', finished_at = NULL WHERE id = $1`, [
      a,
    ]);
    await dataSource.query('DELETE FROM result WHERE job_id = $1', [a]);
    expect(await queue.complete(a, null, ok)).toBe(true);
    expect((await stateOf(c)).due).toBe(false);
    expect(await queue.complete(b, null, ok)).toBe(true);
    expect((await stateOf(c)).due).toBe(true);
  });

  onServer(
    'releases a fan-in exactly once when its needs end in two transactions at once',
    async () => {
      const listener = new Client({ connectionString: opened.database.url ?? '' });
      await listener.connect();
      const released: string[] = [];
      listener.on('notification', (message) => {
        if (message.channel === JOB_QUEUED_CHANNEL && message.payload === 'xml') {
          released.push(message.payload);
        }
      });
      await listener.query(`LISTEN ${JOB_QUEUED_CHANNEL}`);
      try {
        const rounds = 10;
        const fanIns: string[] = [];
        for (let round = 0; round < rounds; round += 1) {
          const a = await submit();
          const b = await submit();
          const c = await submit([need(a, 'a'), need(b, 'b')], 'xml');
          fanIns.push(c);
          // Each needed job ends in a transaction of its own; the first holds its end open while
          // the second ends, so both statements run before either commits.
          const first = dataSource.createQueryRunner();
          const second = dataSource.createQueryRunner();
          await first.startTransaction();
          await second.startTransaction();
          try {
            expect(await completeInOne(sender, first.manager, a, null, ok)).toBe(true);
            const secondEnds = completeInOne(sender, second.manager, b, null, ok);
            // The second statement waits for the first's lock on the fan-in's count.
            await waitFor(
              async () =>
                (
                  await dataSource.query<Array<{ n: number }>>(
                    `SELECT count(*)::int AS n FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock'`,
                  )
                )[0].n > 0,
              10_000,
              'the second end to wait for the first',
            );
            // A round in which the first dies instead of committing: its end rolls back with it.
            if (round % 2 === 1) {
              await first.rollbackTransaction();
              await secondEnds;
              await second.commitTransaction();
              expect((await stateOf(c)).due).toBe(false);
              expect(await queue.complete(a, null, ok)).toBe(true);
            } else {
              await first.commitTransaction();
              await secondEnds;
              await second.commitTransaction();
            }
          } finally {
            await first.release();
            await second.release();
          }
          expect(await stateOf(c)).toEqual({ state: 'QUEUED', due: true, cancelled: false });
        }
        const counts = await dataSource.query<Array<{ needs_left: number }>>(
          'SELECT needs_left FROM job_wait WHERE job_id = ANY ($1::uuid[])',
          [fanIns],
        );
        expect(counts.map((row) => row.needs_left)).toEqual(fanIns.map(() => 0));
        await waitFor(() => Promise.resolve(released.length >= rounds), 10_000, 'the releases');
        // A moment for a second release to show up, had there been one.
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(released).toHaveLength(rounds);
      } finally {
        await listener.end();
      }
    },
  );
});
