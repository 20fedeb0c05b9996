import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import type { Cron } from 'croner';
import type { EntityManager } from 'typeorm';
import { scheduleActor } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { outsideRequests } from '../common/outside-requests';
import { MailConfig } from '../config/config-slices';
import { JobsService, SubmittedJob } from '../jobs/jobs.service';
import { MailReplyService } from '../mail-replies/mail-reply.service';
import { DatabaseEvents } from '../storage/database-events.service';
import { NodeIdentity } from '../storage/node-identity';
import { inSpan } from '../tracing/tracing';
import { SCHEDULE_ID_META, SCHEDULE_PLANNED_TIME_META } from './schedule.dto';
import { isDatabaseUnavailable } from '../common/api-exception.filter';
import { LogThrottle } from '../common/log-throttle';
import { backOffDelay } from '../common/back-off';
import { cronOf, planRuns } from './schedule-plan';
import { CatchUp, ScheduleEntity } from './schedule.entity';
import {
  ActiveSchedule,
  SCHEDULES_CHANGED_CHANNEL,
  ScheduleRepository,
  StoredRun,
} from './schedule.repository';
import { JobSource } from '../queue/queue.types';

/** The schedules are read again at least this often, whatever the notifications say. */
const REREAD_MS = 60_000;
/**
 * After a pass that failed (the database away), the next one comes at most this much later,
 * backing off (backOffDelay) while passes keep failing...
 */
const RETRY_MS = 1_000;
const CLEANUP_EVERY_MS = 3_600_000;
const REFUSAL_LOG_EVERY_MS = 60_000;
/**
 * Passes in a row in which a schedule's due times fail to be stored (an error of the database
 * or of svc, not a refusal by the intake, not an outage) before they are recorded as failed: a
 * poison run is not tried for ever, at start or later.
 */
export const FIRE_ATTEMPTS = 3;
/** ...up to this long; so do a schedule's failed attempts to fire (FIRE_ATTEMPTS). */
const RETRY_MAX_MS = 60_000;

/**
 * Fires the schedules on this node (docs/operations.md#schedules). Each node that runs it sleeps
 * until the earliest next planned time of any schedule (at most a minute, and it wakes at once
 * when a schedule changes anywhere: SCHEDULES_CHANGED_CHANNEL), then fires what is due. A planned
 * time becomes one job across the cluster: the node holds the schedule's row lock while it inserts
 * the time's schedule_run key and the job (through the intake) in one transaction, so a second
 * node's insert conflicts, or it finds the clock moved past the time, and makes none. A schedule
 * with `email` owes its job's result by e-mail in that same transaction (MailReplyService).
 */
@Injectable()
export class ScheduleTicker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Schedules');
  private readonly crons = new Map<string, Cron>();
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private lastCleanup = 0;
  /** Passes in a row that failed as a whole: their retries back off. */
  private passFailures = 0;
  private readonly unsubscribe: Array<() => void> = [];
  /** Failed attempts in a row per schedule (FIRE_ATTEMPTS), on this node since its start. */
  private readonly failures = new Map<string, number>();
  /** Refusals by the intake are logged once a minute per schedule (each is a run row anyway). */
  private readonly refusals = new LogThrottle(REFUSAL_LOG_EVERY_MS);

  constructor(
    private readonly schedules: ScheduleRepository,
    private readonly jobs: JobsService,
    private readonly events: DatabaseEvents,
    private readonly node: NodeIdentity,
    private readonly mail: MailReplyService,
    private readonly config: MailConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.unsubscribe.push(
      this.events.subscribe(SCHEDULES_CHANGED_CHANNEL, () => this.wake()),
      // Changes made while the LISTEN connection was down were not heard.
      this.events.onListening(() => this.wake()),
    );
    this.wake();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.unsubscribe.forEach((stop) => stop());
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    await this.pass;
  }

  /**
   * Starts a pass now, or right after the one under way. Outside of any request: a request that
   * changed a schedule wakes the ticker, but the pass, its jobs and its timers are not its work.
   */
  wake(): void {
    outsideRequests(() => this.startPass());
  }

  private startPass(): void {
    if (this.stopped) {
      return;
    }
    if (this.pass !== null) {
      this.again = true;
      return;
    }
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.pass = this.runPass()
      .then((wakeAt) => {
        this.passFailures = 0;
        return wakeAt;
      })
      .catch((error: Error) => {
        this.passFailures += 1;
        const delay = backOffDelay(this.passFailures, RETRY_MS, RETRY_MAX_MS);
        this.logger.warn(`schedules: ${error.message}; trying again in ${delay} ms`);
        return Date.now() + delay;
      })
      .then((wakeAt) => {
        this.pass = null;
        if (this.again) {
          this.again = false;
          this.wake();
        } else if (!this.stopped) {
          this.timer = setTimeout(() => this.wake(), Math.max(1, wakeAt - Date.now()));
        }
      });
  }

  /** Fires every schedule that is due; returns when the next pass is due (epoch ms). */
  async runPass(): Promise<number> {
    let wakeAt = Date.now() + REREAD_MS;
    for (const schedule of await this.schedules.active()) {
      if (this.stopped) {
        break;
      }
      let cron: Cron;
      try {
        cron = this.cronOf(schedule);
      } catch {
        continue; // checked when stored; a runtime without the time zone any more skips it
      }
      let coveredUntil = schedule.coveredUntil;
      let next = cron.nextRun(coveredUntil);
      if (next !== null && next.getTime() <= Date.now()) {
        try {
          coveredUntil = (await this.fireOrGiveUp(schedule.id)) ?? coveredUntil;
        } catch (error) {
          const failures = this.failures.get(schedule.id) ?? 1;
          this.logger.warn(`schedule ${schedule.id}: ${(error as Error).message}`);
          wakeAt = Math.min(wakeAt, Date.now() + backOffDelay(failures, RETRY_MS, RETRY_MAX_MS));
          continue;
        }
        next = cron.nextRun(coveredUntil);
      }
      if (next !== null) {
        wakeAt = Math.min(wakeAt, next.getTime());
      }
    }
    if (Date.now() - this.lastCleanup >= CLEANUP_EVERY_MS) {
      this.lastCleanup = Date.now();
      await this.schedules.deleteOldRuns();
    }
    return wakeAt;
  }

  /**
   * Fires a schedule; once its due times have failed FIRE_ATTEMPTS times in a row with the
   * database answering (not an outage: that is waited out, backing off), records them as failed
   * instead (schedule_run.error, the schedule's last run) and moves its clock past them.
   */
  private async fireOrGiveUp(scheduleId: string): Promise<Date | null> {
    let reason: string;
    try {
      const coveredUntil = await this.fire(scheduleId);
      this.failures.delete(scheduleId);
      return coveredUntil;
    } catch (error) {
      const failures = (this.failures.get(scheduleId) ?? 0) + 1;
      this.failures.set(scheduleId, failures);
      if (failures < FIRE_ATTEMPTS || isDatabaseUnavailable(error)) {
        throw error;
      }
      reason = `the job could not be stored after ${FIRE_ATTEMPTS} attempts: ${(error as Error).message}`;
    }
    const coveredUntil = await this.fire(scheduleId, reason);
    this.failures.delete(scheduleId);
    this.logger.error(`schedule ${scheduleId}: ${reason}; recorded as failed, not tried again`);
    return coveredUntil;
  }

  /**
   * Fires what is due of one schedule under its row lock; returns its new clock (null: it is gone
   * or paused). Jobs are announced to this node's workers once the transaction has committed.
   * With `failure`, no job is made: each due time is recorded as failed with that error.
   */
  async fire(scheduleId: string, failure?: string): Promise<Date | null> {
    const submitted: SubmittedJob[] = [];
    const coveredUntil = await this.schedules.withLockedSchedule(
      scheduleId,
      async (schedule, manager) =>
        // A trace of its own for each run, linked to the request that made the schedule.
        inSpan(
          'svc.schedule.run',
          {
            parent: null,
            links:
              schedule.traceparent === null
                ? []
                : [{ traceparent: schedule.traceparent, tracestate: schedule.tracestate }],
            attributes: {
              'svc.schedule.id': schedule.id,
              'svc.application': schedule.applicationName,
            },
          },
          () => this.fireLocked(schedule, manager, submitted, failure),
        ),
    );
    submitted.forEach((job) => this.jobs.announce(job));
    if (submitted.length > 0) {
      this.mail.wake(); // a result owed by e-mail may be due already (results come later)
    }
    return coveredUntil;
  }

  /** fire's work under the schedule's row lock, in its transaction. */
  private async fireLocked(
    schedule: ScheduleEntity,
    manager: EntityManager,
    submitted: SubmittedJob[],
    failure: string | undefined,
  ): Promise<Date> {
    const plan = planRuns(
      this.cronOf(schedule),
      schedule.coveredUntil,
      new Date(),
      schedule.catchUp,
    );
    if (plan.missed) {
      this.logger.log(
        `schedule ${schedule.id} missed planned times up to ${plan.coveredUntil.toISOString()}: ` +
          (schedule.catchUp === CatchUp.RUN_ONCE ? 'one job for them' : 'skipped'),
      );
    }
    let lastRun: StoredRun | null = null;
    for (const plannedAt of plan.fire) {
      if (!(await this.schedules.claimRun(manager, schedule.id, plannedAt, this.node.id))) {
        continue; // another node's run has this planned time
      }
      const run =
        failure === undefined
          ? await this.submit(schedule, plannedAt, manager, submitted)
          : { plannedAt, jobId: null, error: failure };
      await this.schedules.recordRun(manager, schedule.id, run);
      lastRun = run;
    }
    if (plan.coveredUntil.getTime() !== schedule.coveredUntil.getTime()) {
      // Nothing to write when another node had fired it already (the usual case on all
      // but one node).
      await this.schedules.advance(manager, schedule.id, plan.coveredUntil, lastRun);
    }
    return plan.coveredUntil;
  }

  /** One planned time's job through the intake, in the run's transaction. */
  private async submit(
    schedule: ScheduleEntity,
    plannedAt: Date,
    transaction: EntityManager,
    submitted: SubmittedJob[],
  ): Promise<StoredRun> {
    const meta = {
      ...schedule.meta,
      ...(schedule.rScript === null ? {} : { rScript: schedule.rScript }),
      [SCHEDULE_ID_META]: schedule.id,
      [SCHEDULE_PLANNED_TIME_META]: plannedAt.toISOString(),
    };
    const callback =
      schedule.callbackUrl === null
        ? null
        : { url: schedule.callbackUrl, linksBase: schedule.callbackLinksBase ?? '' };
    try {
      const job = await this.jobs.submit({
        // The service's own: the schedule's admin was authorized when it was made.
        caller: { kind: 'service' },
        applicationName: schedule.applicationName,
        source: JobSource.SCHEDULE,
        // The job acts as the schedule: its audit row names the schedule, not who made it.
        actor: scheduleActor(schedule.id),
        meta,
        callback,
        parts:
          schedule.payload === null
            ? []
            : [
                {
                  name: `payload.${schedule.jobKind}`,
                  label: "The schedule's payload",
                  content: Buffer.from(schedule.payload, 'utf8'),
                  zip: false,
                },
              ],
        functionCall:
          schedule.jobKind === 'json' || schedule.jobKind === 'xml' ? schedule.jobKind : undefined,
        transaction,
      });
      await this.oweEmail(schedule, job.jobId, transaction);
      submitted.push(job);
      return { plannedAt, jobId: job.jobId, error: null };
    } catch (error) {
      if (!(error instanceof ApiError)) {
        throw error; // the database: the whole pass is tried again
      }
      // Refused by the intake (a callback host no longer allowed, a queue limit): the run is
      // recorded as such; the log says so once a minute per schedule, however often it fires.
      const held = this.refusals.admit(schedule.id);
      if (held !== null) {
        this.logger.warn(
          `schedule ${schedule.id} at ${plannedAt.toISOString()}: ${error.message}` +
            (held > 0 ? ` (refused ${held} more times since the last such line)` : ''),
        );
      }
      return { plannedAt, jobId: null, error: error.message };
    }
  }

  /**
   * The run's e-mail, owed in the run's transaction: stored with the job and its schedule_run
   * key or not at all, so a node dying after the commit leaves it to be sent by another node,
   * and a planned time (one job) owes one e-mail.
   */
  private async oweEmail(
    schedule: ScheduleEntity,
    jobId: string,
    transaction: EntityManager,
  ): Promise<void> {
    const email = schedule.email;
    if (email === null) {
      return;
    }
    const from = this.config.emailFrom;
    if (from === null) {
      // Checked when the schedule was stored; the setting was removed since.
      this.logger.warn(
        `schedule ${schedule.id}: EMAIL_FROM is not set; job ${jobId} is not sent by e-mail`,
      );
      return;
    }
    await this.mail.sendResult(
      jobId,
      schedule.applicationName,
      {
        to: email.to.join(', '),
        cc: email.cc.length === 0 ? null : email.cc.join(', '),
        subject: email.subject,
        from,
      },
      transaction,
    );
  }

  private cronOf(schedule: Pick<ActiveSchedule, 'cron' | 'timeZone'>): Cron {
    const key = `${schedule.timeZone} ${schedule.cron}`;
    let cron = this.crons.get(key);
    if (cron === undefined) {
      cron = cronOf(schedule.cron, schedule.timeZone);
      this.crons.set(key, cron);
    }
    return cron;
  }
}
