import { Cron } from 'croner';
import { ApiError } from '../common/api-error';
import { CatchUp } from './schedule.entity';

/**
 * A planned time fired within this long after it is on time and runs; later, it was missed (no
 * node ran the schedule then) and the schedule's catch-up policy decides. A minute: a busy node,
 * a rolling restart or a fail-over stay on time; an outage does not.
 */
export const MISSED_AFTER_MS = 60_000;

/** Checks an IANA time zone name; a 400 naming it otherwise. */
export function checkTimeZone(timeZone: string): string {
  try {
    // Throws a RangeError for a name the runtime's time zone data does not know.
    new Intl.DateTimeFormat('en-US', { timeZone }).format(0);
  } catch {
    throw ApiError.badRequest(
      `timeZone "${timeZone.slice(0, 80)}" is not an IANA time zone (e.g. "Europe/Berlin", "UTC").`,
    );
  }
  return timeZone;
}

/**
 * The cron expression in its time zone: five fields (minute first) or six (second first), or a
 * nickname such as `@daily`. A 400 naming the expression when it is not one, or never fires.
 */
export function cronOf(expression: string, timeZone: string): Cron {
  const zone = checkTimeZone(timeZone);
  let cron: Cron;
  try {
    cron = new Cron(expression, { timezone: zone, paused: true });
  } catch (error) {
    const reason = (error as Error).message.replace(/^CronPattern: /, '');
    throw ApiError.badRequest(
      `cron "${expression.slice(0, 80)}" is not a valid cron expression: ${reason}.`,
    );
  }
  if (cron.nextRun() === null) {
    throw ApiError.badRequest(`cron "${expression.slice(0, 80)}" never fires.`);
  }
  return cron;
}

/** What a pass does for one schedule: the planned times to run, and its new clock. */
export interface RunPlan {
  /** Planned times to run a job for, oldest first. */
  fire: Date[];
  /** Whether planned times were missed (the catch-up policy decided about them). */
  missed: boolean;
  /** The schedule's new `covered_until`: the latest planned time settled; unchanged: none. */
  coveredUntil: Date;
}

/**
 * The planned times in (coveredUntil, now]: those at most MISSED_AFTER_MS old run each; older
 * ones were missed, and become one job planned at the latest of them (runOnce) or none (skip).
 * A schedule down for a week on a per-second cron costs no walk over its missed times.
 */
export function planRuns(cron: Cron, coveredUntil: Date, now: Date, catchUp: CatchUp): RunPlan {
  const first = cron.nextRun(coveredUntil);
  if (first === null || first > now) {
    return { fire: [], missed: false, coveredUntil };
  }
  const onTimeFrom = new Date(now.getTime() - MISSED_AFTER_MS);
  const fire: Date[] = [];
  let settled = coveredUntil;
  const missed = first <= onTimeFrom;
  if (missed) {
    // The latest missed time: the last planned time at or before onTimeFrom.
    const [latest] = cron.previousRuns(1, new Date(onTimeFrom.getTime() + 1));
    settled = latest && latest > first ? latest : first;
    if (catchUp === CatchUp.RUN_ONCE) {
      fire.push(settled);
    }
  }
  for (let next = cron.nextRun(settled); next !== null && next <= now; next = cron.nextRun(next)) {
    fire.push(next);
    settled = next;
  }
  return { fire, missed, coveredUntil: settled };
}

/** The next planned time after the schedule's clock; null when the expression fires no more. */
export function nextPlanned(cron: Cron, coveredUntil: Date): Date | null {
  return cron.nextRun(coveredUntil);
}
