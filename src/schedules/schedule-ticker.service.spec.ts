import { Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { ApiError } from '../common/api-error';
import type { JobsService, Submission, SubmittedJob } from '../jobs/jobs.service';
import { loadConfig } from '../config/app-config';
import { configView } from '../config/config-slice';
import { MailConfig } from '../config/config-slices';
import type { MailReplyService, ResultMailRequest } from '../mail-replies/mail-reply.service';
import type { DatabaseEvents } from '../storage/database-events.service';
import { FIRE_ATTEMPTS, ScheduleTicker } from './schedule-ticker.service';
import { ScheduleEntity } from './schedule.entity';
import type { ScheduleRepository, StoredRun } from './schedule.repository';

const NOW = new Date('2026-01-01T10:00:00.500Z');

function scheduleRow(fields: Partial<ScheduleEntity>): ScheduleEntity {
  return Object.assign(new ScheduleEntity(), {
    id: '00000000-0000-4000-8000-000000000001',
    applicationName: 'demo',
    name: 'test',
    cron: '* * * * * *',
    timeZone: 'UTC',
    jobKind: 'script',
    rScript: 'tick.R',
    meta: { region: 'north' },
    payload: null,
    catchUp: 'runOnce',
    callbackUrl: null,
    callbackLinksBase: null,
    email: null,
    paused: false,
    coveredUntil: new Date('2026-01-01T10:00:00Z'),
    ...fields,
  });
}

/** The ticker with its database and intake replaced: what it stores is recorded. */
function tickerWith(row: ScheduleEntity, claimed = true, failures: Error[] = []) {
  const manager = {} as EntityManager;
  const stored = { runs: [] as StoredRun[], advanced: [] as Date[], announced: [] as string[] };
  const submissions: Submission[] = [];
  const repository = {
    active: () => Promise.resolve([row]),
    withLockedSchedule: (
      _id: string,
      work: (schedule: ScheduleEntity, m: EntityManager) => Promise<unknown>,
    ) => work(row, manager),
    claimRun: () => Promise.resolve(claimed),
    recordRun: (_m: EntityManager, _id: string, run: StoredRun) => {
      stored.runs.push(run);
      return Promise.resolve();
    },
    advance: (_m: EntityManager, _id: string, coveredUntil: Date) => {
      stored.advanced.push(coveredUntil);
      row.coveredUntil = coveredUntil;
      return Promise.resolve();
    },
    deleteOldRuns: () => Promise.resolve(),
  };
  const jobs = {
    submit: (submission: Submission): Promise<SubmittedJob> => {
      submissions.push(submission);
      const failure = failures.shift();
      if (failure !== undefined) {
        return Promise.reject(failure);
      }
      return Promise.resolve({
        jobId: `job-${submissions.length}`,
        applicationName: 'demo',
        submissionTime: NOW,
        kind: 'script',
        source: 'schedule',
      });
    },
    announce: (job: SubmittedJob) => stored.announced.push(job.jobId),
  };
  const mailed: Array<{ jobId: string; request: ResultMailRequest; transaction?: EntityManager }> =
    [];
  const mail = {
    sendResult: (
      jobId: string,
      _application: string,
      request: ResultMailRequest,
      transaction?: EntityManager,
    ) => {
      mailed.push({ jobId, request, transaction });
      return Promise.resolve();
    },
    wake: () => undefined,
  };
  const ticker = new ScheduleTicker(
    repository as unknown as ScheduleRepository,
    jobs as unknown as JobsService,
    {} as DatabaseEvents,
    { id: 'node-a' },
    mail as unknown as MailReplyService,
    configView(loadConfig({ EMAIL_FROM: 'jobs@example.com' }), MailConfig.keys),
  );
  return { ticker, stored, submissions, manager, mailed, repository };
}

describe('ScheduleTicker', () => {
  beforeEach(() => jest.useFakeTimers({ now: NOW }));
  afterEach(() => jest.useRealTimers());

  it("owes a schedule's e-mail for each job in the run's transaction", async () => {
    const row = scheduleRow({
      coveredUntil: new Date('2026-01-01T09:59:59Z'),
      email: { to: ['a@example.com', 'b@example.com'], cc: [], subject: 'Nightly' },
    });
    const { ticker, manager, mailed } = tickerWith(row);
    await ticker.fire(row.id);
    expect(mailed).toEqual([
      {
        jobId: 'job-1',
        request: {
          to: 'a@example.com, b@example.com',
          cc: null,
          subject: 'Nightly',
          from: 'jobs@example.com',
        },
        transaction: manager,
      },
    ]);
  });

  it('owes no e-mail for a planned time another node has', async () => {
    const row = scheduleRow({
      coveredUntil: new Date('2026-01-01T09:59:59Z'),
      email: { to: ['a@example.com'], cc: [], subject: 'Nightly' },
    });
    const { ticker, mailed } = tickerWith(row, false);
    await ticker.fire(row.id);
    expect(mailed).toEqual([]);
  });

  it('sleeps until the next planned time, and at most a minute', async () => {
    const hourly = tickerWith(scheduleRow({ cron: '0 0 * * * *' }));
    expect(await hourly.ticker.runPass()).toBe(NOW.getTime() + 60_000);
    const soon = tickerWith(scheduleRow({ cron: '10 0 10 * * *' }));
    expect(await soon.ticker.runPass()).toBe(Date.parse('2026-01-01T10:00:10Z'));
    expect(soon.submissions).toEqual([]);
  });

  it("fires a due time through the intake in the run's transaction, and announces the job after", async () => {
    const row = scheduleRow({ coveredUntil: new Date('2026-01-01T09:59:59Z') });
    const { ticker, stored, submissions, manager } = tickerWith(row);
    const wakeAt = await ticker.runPass();
    expect(submissions).toHaveLength(1);
    expect(submissions[0]).toMatchObject({
      applicationName: 'demo',
      source: 'schedule',
      meta: {
        region: 'north',
        rScript: 'tick.R',
        scheduleId: row.id,
        schedulePlannedTime: '2026-01-01T10:00:00.000Z',
      },
      parts: [],
      transaction: manager,
    });
    expect(stored.runs).toEqual([
      { plannedAt: new Date('2026-01-01T10:00:00Z'), jobId: 'job-1', error: null },
    ]);
    expect(stored.announced).toEqual(['job-1']);
    expect(stored.advanced).toEqual([new Date('2026-01-01T10:00:00Z')]);
    // The next second, not a poll.
    expect(wakeAt).toBe(Date.parse('2026-01-01T10:00:01Z'));
  });

  it('makes no job for a planned time whose key another node holds', async () => {
    const row = scheduleRow({ coveredUntil: new Date('2026-01-01T09:59:59Z') });
    const { ticker, stored, submissions } = tickerWith(row, false);
    await ticker.runPass();
    expect(submissions).toEqual([]);
    expect(stored.runs).toEqual([]);
    expect(stored.announced).toEqual([]);
  });

  it('backs off from 1 s between passes that fail as a whole, and starts again from 1 s', async () => {
    const row = scheduleRow({});
    const { ticker, repository } = tickerWith(row);
    const down = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const passes: number[] = [];
    let failing = 3;
    repository.active = () => {
      passes.push(Date.now() - NOW.getTime());
      return failing-- > 0 ? Promise.reject(down) : Promise.resolve([]);
    };
    // The longest draw of the back-off: 1 s, then 2 s, then 4 s.
    const random = jest.spyOn(Math, 'random').mockReturnValue(1);
    try {
      ticker.wake();
      await jest.advanceTimersByTimeAsync(7_000);
      expect(passes).toEqual([0, 1_000, 3_000, 7_000]);
      // Answered again: the next failure waits 1 s again.
      failing = 1;
      ticker.wake();
      await jest.advanceTimersByTimeAsync(1_000);
      expect(passes).toEqual([0, 1_000, 3_000, 7_000, 7_000, 8_000]);
    } finally {
      random.mockRestore();
      await ticker.beforeApplicationShutdown();
    }
  });

  it('records a due time as failed after FIRE_ATTEMPTS failures with the database answering, backing off between', async () => {
    const row = scheduleRow({ coveredUntil: new Date('2026-01-01T09:59:59Z') });
    const refused = new Error('new row for relation "job" violates check constraint');
    const { ticker, stored, submissions } = tickerWith(row, true, [refused, refused, refused]);
    const waits: number[] = [];
    for (let pass = 1; pass < FIRE_ATTEMPTS; pass++) {
      waits.push((await ticker.runPass()) - Date.now());
      expect(stored.runs).toEqual([]);
    }
    // Backing off from 1 s: the second wait is drawn from a ceiling twice the first's.
    expect(waits[0]).toBeLessThanOrEqual(1_000);
    expect(waits[1]).toBeGreaterThanOrEqual(1_000);
    await ticker.runPass();
    expect(submissions).toHaveLength(FIRE_ATTEMPTS);
    expect(stored.runs).toEqual([
      {
        plannedAt: new Date('2026-01-01T10:00:00Z'),
        jobId: null,
        error: `the job could not be stored after ${FIRE_ATTEMPTS} attempts: ${refused.message}`,
      },
    ]);
    expect(stored.advanced).toEqual([new Date('2026-01-01T10:00:00Z')]);
    expect(stored.announced).toEqual([]);
  });

  it('waits out a database outage without recording the due time as failed', async () => {
    const row = scheduleRow({ coveredUntil: new Date('2026-01-01T09:59:59Z') });
    const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
    });
    const { ticker, stored } = tickerWith(
      row,
      true,
      Array.from({ length: 6 }, () => outage),
    );
    for (let pass = 0; pass < 6; pass++) {
      await ticker.runPass();
    }
    expect(stored.runs).toEqual([]);
    // The database is back: the time is fired (one job), late but within the minute.
    await ticker.runPass();
    expect(stored.runs).toEqual([
      { plannedAt: new Date('2026-01-01T10:00:00Z'), jobId: 'job-7', error: null },
    ]);
  });

  it('logs a schedule that the intake refuses every second once a minute, with the count held back', async () => {
    const row = scheduleRow({ coveredUntil: new Date('2026-01-01T09:59:59Z') });
    const refused = ApiError.tooManyRequests('The application "demo" has 5 jobs queued', 10);
    const { ticker, stored } = tickerWith(
      row,
      true,
      Array.from({ length: 121 }, () => refused),
    );
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      for (let second = 0; second <= 120; second++) {
        await ticker.fire(row.id);
        jest.advanceTimersByTime(1_000);
      }
      // Every refusal is a run row; the log has three lines in two minutes, not 121.
      expect(stored.runs).toHaveLength(121);
      expect(stored.runs.every((run) => run.error === refused.message)).toBe(true);
      const lines = warn.mock.calls.map(([message]) => String(message));
      expect(lines).toHaveLength(3);
      expect(lines[0]).toMatch(
        /^schedule \S+ at 2026-01-01T10:00:00.000Z: The application "demo" has 5 jobs queued$/,
      );
      expect(lines[1]).toMatch(/\(refused 59 more times since the last such line\)$/);
      expect(lines[2]).toMatch(/\(refused 59 more times since the last such line\)$/);
    } finally {
      warn.mockRestore();
    }
  });
});
