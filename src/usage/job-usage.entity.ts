import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * What one finished job used, written by the statement that stores its result (QueueRepository)
 * and kept apart from the job: deleting a result or its job leaves the record, so usage
 * statistics stay true after results are fetched and deleted. Old records go after
 * USAGE_RETENTION_DAYS.
 */
@Entity({ name: 'job_usage' })
@Index('IDX_job_usage_finished', ['finishedAt'])
@Index('IDX_job_usage_application_finished', ['applicationName', 'finishedAt'])
@Index('IDX_job_usage_application_submitted', ['applicationName', 'submittedAt'])
export class JobUsageEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  /** script or function (JobKind). */
  @Column({ type: 'varchar', length: 16 }) kind!: string;

  /** succeeded, failed or cancelled. */
  @Column({ type: 'varchar', length: 16 }) outcome!: string;

  @Column({ name: 'submitted_at', type: 'timestamptz' }) submittedAt!: Date;

  /** NULL for a job cancelled before it started. */
  @Column({ name: 'started_at', type: 'timestamptz', nullable: true }) startedAt!: Date | null;

  @Column({ name: 'finished_at', type: 'timestamptz' }) finishedAt!: Date;

  /** CPU milliseconds of R (and what it waited for); NULL where the engine does not report it. */
  @Column({ name: 'r_cpu_ms', type: 'int', nullable: true }) rCpuMs!: number | null;

  /** Bytes of the job's input files. */
  @Column({ name: 'bytes_in', type: 'bigint' }) bytesIn!: string;

  /** Bytes of its result. */
  @Column({ name: 'bytes_out', type: 'bigint' }) bytesOut!: string;
}
