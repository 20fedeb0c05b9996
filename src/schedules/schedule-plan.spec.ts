import { ApiError } from '../common/api-error';
import { cronOf, MISSED_AFTER_MS, planRuns } from './schedule-plan';
import { CatchUp } from './schedule.entity';

const at = (iso: string): Date => new Date(iso);

describe('cronOf', () => {
  it('takes five fields, six with seconds, and nicknames, in an IANA time zone', () => {
    expect(cronOf('30 6 * * 1-5', 'Europe/Berlin').nextRun(at('2026-11-26T12:00:00Z'))).toEqual(
      at('2026-11-27T05:30:00Z'), // 06:30 in Berlin (UTC+1 in November)
    );
    expect(cronOf('*/5 * * * * *', 'UTC').nextRun(at('2026-01-01T00:00:01Z'))).toEqual(
      at('2026-01-01T00:00:05Z'),
    );
    expect(cronOf('@daily', 'UTC').nextRun(at('2026-01-01T10:00:00Z'))).toEqual(
      at('2026-01-02T00:00:00Z'),
    );
  });

  it.each([
    ['61 * * * *', 'UTC', /cron "61 \* \* \* \*" is not a valid cron expression/],
    ['* * *', 'UTC', /cron "\* \* \*" is not a valid cron expression/],
    ['0 0 30 2 *', 'UTC', /cron "0 0 30 2 \*" never fires/],
    ['* * * * *', 'Mars/Olympus', /timeZone "Mars\/Olympus" is not an IANA time zone/],
  ])('refuses %s in %s with a 400 naming it', (expression, zone, message) => {
    let thrown: unknown;
    try {
      cronOf(expression, zone);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect((thrown as ApiError).getStatus()).toBe(400);
    expect((thrown as ApiError).message).toMatch(message);
  });
});

describe('planRuns', () => {
  const everySecond = cronOf('* * * * * *', 'UTC');
  const hourly = cronOf('0 15 * * * *', 'UTC');

  it('fires nothing before the next planned time', () => {
    const plan = planRuns(hourly, at('2026-01-01T10:15:00Z'), at('2026-01-01T11:14:59Z'), 'skip');
    expect(plan).toEqual({ fire: [], missed: false, coveredUntil: at('2026-01-01T10:15:00Z') });
  });

  it('fires every planned time that is on time, each once, oldest first', () => {
    const plan = planRuns(
      everySecond,
      at('2026-01-01T00:00:00Z'),
      at('2026-01-01T00:00:03.200Z'),
      CatchUp.SKIP,
    );
    expect(plan.fire).toEqual([
      at('2026-01-01T00:00:01Z'),
      at('2026-01-01T00:00:02Z'),
      at('2026-01-01T00:00:03Z'),
    ]);
    expect(plan).toMatchObject({ missed: false, coveredUntil: at('2026-01-01T00:00:03Z') });
  });

  it('runOnce: one job for the missed times, planned at the latest of them', () => {
    const plan = planRuns(
      hourly,
      at('2026-01-01T05:00:00Z'),
      at('2026-01-01T10:45:00Z'),
      CatchUp.RUN_ONCE,
    );
    expect(plan).toEqual({
      fire: [at('2026-01-01T10:15:00Z')],
      missed: true,
      coveredUntil: at('2026-01-01T10:15:00Z'),
    });
  });

  it('skip: no job for the missed times, the clock moves past them', () => {
    const plan = planRuns(hourly, at('2026-01-01T05:00:00Z'), at('2026-01-01T10:45:00Z'), 'skip');
    expect(plan).toEqual({ fire: [], missed: true, coveredUntil: at('2026-01-01T10:15:00Z') });
  });

  it('a missed stretch and the times since that are still on time: one catch-up plus each', () => {
    const now = at('2026-01-01T12:00:00.500Z');
    const plan = planRuns(everySecond, at('2026-01-01T00:00:00Z'), now, CatchUp.RUN_ONCE);
    const onTimeFrom = now.getTime() - MISSED_AFTER_MS;
    // The latest missed second, then every second of the last minute.
    expect(plan.fire[0]).toEqual(new Date(Math.floor(onTimeFrom / 1000) * 1000));
    expect(plan.fire).toHaveLength(61);
    expect(plan.coveredUntil).toEqual(at('2026-01-01T12:00:00Z'));
    const skipped = planRuns(everySecond, at('2026-01-01T00:00:00Z'), now, CatchUp.SKIP);
    expect(skipped.fire).toHaveLength(60);
    expect(skipped.fire[0]).toEqual(new Date(Math.floor(onTimeFrom / 1000) * 1000 + 1000));
  });

  it('follows the time zone across a change of daylight saving time', () => {
    const daily = cronOf('0 30 2 * * *', 'Europe/Berlin');
    // 2026-03-29: 02:00 jumps to 03:00 in Berlin; the nonexistent 02:30 runs at 03:00 (01:00Z).
    const plan = planRuns(daily, at('2026-03-28T02:00:00Z'), at('2026-03-29T01:00:30Z'), 'skip');
    expect(plan).toEqual({
      fire: [at('2026-03-29T01:00:00Z')],
      missed: false,
      coveredUntil: at('2026-03-29T01:00:00Z'),
    });
  });
});
