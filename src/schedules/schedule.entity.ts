import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';

/** What a schedule does after its nodes were down past planned times (docs/api.md#schedules). */
export const CatchUp = Object.freeze({
  /** One job for all the missed times, planned at the latest of them. */
  RUN_ONCE: 'runOnce',
  /** No job for missed times: the next planned time is the next run. */
  SKIP: 'skip',
} as const);
export type CatchUp = (typeof CatchUp)[keyof typeof CatchUp];

/** A schedule's `email` (docs/api.md#schedules): its results' recipients and subject. */
export interface ScheduleEmail {
  to: string[];
  cc: string[];
  subject: string;
}

/**
 * A job that runs on a cron expression in a time zone: a catalog script with meta parameters, or
 * a function call with its payload. `covered_until` is the schedule's clock: every planned time
 * at or before it is settled (run, skipped, or before the schedule existed or was resumed).
 */
@Entity({ name: 'schedule' })
@Index('schedule_application_idx', ['applicationName'])
export class ScheduleEntity {
  @PrimaryColumn({ type: 'uuid' }) id!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  @Column({ type: 'varchar', length: 200 }) name!: string;

  @Column({ type: 'varchar', length: 200 }) cron!: string;

  /** An IANA time zone, e.g. Europe/Berlin. */
  @Column({ name: 'time_zone', type: 'varchar', length: 64 }) timeZone!: string;

  /** script, xml or json (the job's kind). */
  @Column({ name: 'job_kind', type: 'varchar', length: 16 }) jobKind!: string;

  /** A script job's catalog script (R_SCRIPTS); null for a function call. */
  @Column({ name: 'r_script', type: 'varchar', length: 255, nullable: true })
  rScript!: string | null;

  /** A script job's meta parameters. */
  @Column({ type: 'jsonb' }) meta!: Record<string, string>;

  /** A function call's payload (XML or JSON text); null for a script job. */
  @Column({ type: 'text', nullable: true }) payload!: string | null;

  @Column({ name: 'catch_up', type: 'varchar', length: 16 }) catchUp!: CatchUp;

  @Column({ name: 'callback_url', type: 'varchar', length: 2048, nullable: true })
  callbackUrl!: string | null;

  /** The public base URL the schedule was made under: its jobs' callbacks link to it. */
  @Column({ name: 'callback_links_base', type: 'varchar', length: 2048, nullable: true })
  callbackLinksBase!: string | null;

  /** Where each run's result is sent by e-mail; null: not by e-mail. */
  @Column({ type: 'jsonb', nullable: true }) email!: ScheduleEmail | null;

  @Column({ type: 'boolean', default: false }) paused!: boolean;

  @Column({ name: 'covered_until', type: 'timestamptz' }) coveredUntil!: Date;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;

  /** The principal that made it (its name as authenticated); null: made before this was kept. */
  @Column({ name: 'created_by', type: 'varchar', length: 256, nullable: true })
  createdBy!: string | null;

  /** The principal that last changed it (made, replaced, paused or resumed it). */
  @Column({ name: 'updated_by', type: 'varchar', length: 256, nullable: true })
  updatedBy!: string | null;

  /**
   * The trace context of the request that made it: each run starts a trace of its own that links
   * to it (docs/operations.md#tracing). Null when tracing was off.
   */
  @Column({ type: 'varchar', length: 55, nullable: true }) traceparent!: string | null;

  @Column({ type: 'varchar', length: 512, nullable: true }) tracestate!: string | null;

  /** The planned time of the last run (a job, or an error that kept it from being one). */
  @Column({ name: 'last_planned_at', type: 'timestamptz', nullable: true })
  lastPlannedAt!: Date | null;

  /** When the last run happened. */
  @Column({ name: 'last_run_at', type: 'timestamptz', nullable: true }) lastRunAt!: Date | null;

  @Column({ name: 'last_job_id', type: 'uuid', nullable: true }) lastJobId!: string | null;

  /** Why the last run made no job (the intake refused it); null when it made one. */
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError!: string | null;
}

/**
 * One planned time of a schedule that a node acted on. Its key (schedule, planned time) is what
 * makes a planned time fire once across the cluster: it is inserted in the transaction that
 * stores the job, so a second node's insert conflicts and that node makes no job.
 */
@Entity({ name: 'schedule_run' })
@Index('schedule_run_fired_idx', ['firedAt'])
export class ScheduleRunEntity {
  @PrimaryColumn({ name: 'schedule_id', type: 'uuid' }) scheduleId!: string;

  @PrimaryColumn({ name: 'planned_at', type: 'timestamptz' }) plannedAt!: Date;

  @ManyToOne(() => ScheduleEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'schedule_id', foreignKeyConstraintName: 'schedule_run_schedule_fk' })
  schedule?: ScheduleEntity;

  /** The job it made; null when the intake refused it (see error). */
  @Column({ name: 'job_id', type: 'uuid', nullable: true }) jobId!: string | null;

  @Column({ name: 'fired_at', type: 'timestamptz' }) firedAt!: Date;

  /** The node that fired it (NodeIdentity). */
  @Column({ type: 'varchar', length: 255 }) node!: string;

  @Column({ type: 'text', nullable: true }) error!: string | null;
}
