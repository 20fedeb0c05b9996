import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { DatabaseEvents } from '../storage/database-events.service';
import { rowsOf } from '../storage/query-rows';
import { ScheduleEntity } from './schedule.entity';

/** Payload: a schedule's id, after it was made, changed, paused, resumed or deleted. */
export const SCHEDULES_CHANGED_CHANNEL = 'svc_schedules_changed';

/**
 * Records a change in its transaction (the audit trail): the schedule before it (null: made now)
 * and after it (null: deleted). Not called when nothing changed (no such schedule).
 */
export type ScheduleChangeRecorder = (
  manager: EntityManager,
  before: ScheduleEntity | null,
  after: ScheduleEntity | null,
) => Promise<void>;

/** Runs are kept this long (inspection only: the key matters for a minute at most). */
const RUN_RETENTION_DAYS = 7;

/** What the ticker needs of a schedule that is not paused. */
export interface ActiveSchedule {
  id: string;
  cron: string;
  timeZone: string;
  coveredUntil: Date;
}

/** A run a pass stored: its planned time, and its job or why there is none. */
export interface StoredRun {
  plannedAt: Date;
  jobId: string | null;
  error: string | null;
}

/**
 * Every statement about schedule and schedule_run. Changes notify SCHEDULES_CHANGED_CHANNEL in
 * their transaction, so every node's ticker reads the schedules again.
 */
@Injectable()
export class ScheduleRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly events: DatabaseEvents,
  ) {}

  async list(applicationName: string): Promise<ScheduleEntity[]> {
    return this.dataSource.getRepository(ScheduleEntity).find({
      where: { applicationName },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }

  async find(applicationName: string, id: string): Promise<ScheduleEntity | null> {
    return this.dataSource.getRepository(ScheduleEntity).findOneBy({ applicationName, id });
  }

  async insert(schedule: ScheduleEntity, recorder: ScheduleChangeRecorder): Promise<void> {
    await this.changing(
      schedule.id,
      async (manager) => {
        await manager.getRepository(ScheduleEntity).insert(schedule);
        return true;
      },
      recorder,
    );
  }

  /**
   * Changes a schedule's definition (only the columns given: its clock and last run stay as the
   * nodes left them); false when it is gone (deleted meanwhile).
   */
  async update(
    applicationName: string,
    id: string,
    fields: Partial<ScheduleEntity>,
    recorder: ScheduleChangeRecorder,
  ): Promise<boolean> {
    return this.changing(
      id,
      async (manager) => {
        const result = await manager
          .getRepository(ScheduleEntity)
          .update({ id, applicationName }, fields);
        return (result.affected ?? 0) > 0;
      },
      recorder,
    );
  }

  async delete(
    applicationName: string,
    id: string,
    recorder: ScheduleChangeRecorder,
  ): Promise<boolean> {
    return this.changing(
      id,
      async (manager) => {
        const result = await manager.getRepository(ScheduleEntity).delete({ id, applicationName });
        return (result.affected ?? 0) > 0;
      },
      recorder,
    );
  }

  /**
   * Pauses or resumes; resuming starts the schedule's clock at now (times planned while it was
   * paused are not missed, they never were). False when there is no such schedule.
   */
  async setPaused(
    applicationName: string,
    id: string,
    paused: boolean,
    updatedBy: string | null,
    recorder: ScheduleChangeRecorder,
  ): Promise<boolean> {
    return this.changing(
      id,
      async (manager) => {
        const raw: unknown = await manager.query(
          `UPDATE schedule SET paused = $3, updated_at = now(), updated_by = $4,
                  covered_until = CASE WHEN paused AND NOT $3 THEN now() ELSE covered_until END
            WHERE id = $1 AND application_name = $2 RETURNING id`,
          [id, applicationName, paused, updatedBy],
        );
        return rowsOf(raw).length > 0;
      },
      recorder,
    );
  }

  /** The schedules the ticker plans: every one not paused, of every application. */
  async active(): Promise<ActiveSchedule[]> {
    const rows = await this.dataSource.getRepository(ScheduleEntity).find({
      select: { id: true, cron: true, timeZone: true, coveredUntil: true },
      where: { paused: false },
    });
    return rows.map(({ id, cron, timeZone, coveredUntil }) => ({
      id,
      cron,
      timeZone,
      coveredUntil,
    }));
  }

  /**
   * Runs `work` on a schedule under its row lock (null when it is gone or paused), in one
   * transaction: nodes firing the same schedule take turns, and each sees the clock the one
   * before it left.
   */
  async withLockedSchedule<T>(
    id: string,
    work: (schedule: ScheduleEntity, manager: EntityManager) => Promise<T>,
  ): Promise<T | null> {
    return this.dataSource.transaction(async (manager) => {
      const schedule = await manager
        .getRepository(ScheduleEntity)
        .createQueryBuilder('s')
        .where('s.id = :id AND NOT s.paused', { id })
        .setLock('pessimistic_write')
        .getOne();
      return schedule === null ? null : work(schedule, manager);
    });
  }

  /**
   * Takes a planned time of a schedule: true when this transaction inserted its key; false when
   * another node's run has it (the insert waited for that node's transaction and conflicted).
   */
  async claimRun(
    manager: EntityManager,
    scheduleId: string,
    plannedAt: Date,
    node: string,
  ): Promise<boolean> {
    const raw: unknown = await manager.query(
      `INSERT INTO schedule_run (schedule_id, planned_at, fired_at, node)
       VALUES ($1, $2, now(), $3) ON CONFLICT DO NOTHING RETURNING planned_at`,
      [scheduleId, plannedAt, node],
    );
    return rowsOf(raw).length > 0;
  }

  async recordRun(manager: EntityManager, scheduleId: string, run: StoredRun): Promise<void> {
    await manager.query(
      'UPDATE schedule_run SET job_id = $3, error = $4 WHERE schedule_id = $1 AND planned_at = $2',
      [scheduleId, run.plannedAt, run.jobId, run.error],
    );
  }

  /** Moves the schedule's clock forward and, when a run was stored, shows it as the last run. */
  async advance(
    manager: EntityManager,
    scheduleId: string,
    coveredUntil: Date,
    lastRun: StoredRun | null,
  ): Promise<void> {
    await manager.query(
      `UPDATE schedule SET covered_until = greatest(covered_until, $2),
              last_planned_at = CASE WHEN $3 THEN $4::timestamptz ELSE last_planned_at END,
              last_run_at = CASE WHEN $3 THEN now() ELSE last_run_at END,
              last_job_id = CASE WHEN $3 THEN $5::uuid ELSE last_job_id END,
              last_error = CASE WHEN $3 THEN $6::text ELSE last_error END
        WHERE id = $1`,
      [
        scheduleId,
        coveredUntil,
        lastRun !== null,
        lastRun?.plannedAt ?? null,
        lastRun?.jobId ?? null,
        lastRun?.error ?? null,
      ],
    );
  }

  /** Runs older than RUN_RETENTION_DAYS go (schedule_run_fired_idx). */
  async deleteOldRuns(): Promise<void> {
    await this.dataSource.query(
      'DELETE FROM schedule_run WHERE fired_at < now() - make_interval(days => $1)',
      [RUN_RETENTION_DAYS],
    );
  }

  /**
   * A change, its audit row and its notification in one transaction (the row is read before and
   * after under its lock, for the audit's before and after); this node hears of it at once after.
   * `change` answers whether there was a schedule to change.
   */
  private async changing(
    id: string,
    change: (manager: EntityManager) => Promise<boolean>,
    recorder: ScheduleChangeRecorder,
  ): Promise<boolean> {
    const outcome = await this.dataSource.transaction(async (manager) => {
      const rows = manager.getRepository(ScheduleEntity);
      const before = await rows
        .createQueryBuilder('s')
        .where('s.id = :id', { id })
        .setLock('pessimistic_write')
        .getOne();
      if (!(await change(manager))) {
        return false;
      }
      await recorder(manager, before, await rows.findOneBy({ id }));
      await manager.query('SELECT pg_notify($1, $2)', [
        SCHEDULES_CHANGED_CHANNEL,
        this.events.prefix + id,
      ]);
      return true;
    });
    this.events.deliverHere(SCHEDULES_CHANGED_CHANNEL, id);
    return outcome;
  }
}
