import { Column, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from '../queue/job.entity';

export const CallbackState = Object.freeze({
  PENDING: 'pending',
  DELIVERED: 'delivered',
  FAILED: 'failed',
} as const);
export type CallbackState = (typeof CallbackState)[keyof typeof CallbackState];

/**
 * What a job's callback shows (its delivery state): made in the statement that stores the job's
 * result, with the callback job that delivers it (kind `callback` in `job`, whose run_after and
 * lease say when it is attempted), so a stored result with a callback URL always has one;
 * deleted with the job (and so its result).
 */
@Entity({ name: 'job_callback' })
export class JobCallbackEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @OneToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id', foreignKeyConstraintName: 'job_callback_job_fk' })
  job?: JobEntity;

  @Column({ type: 'varchar', length: 2048 }) url!: string;

  @Column({ type: 'varchar', length: 16 }) state!: CallbackState;

  /** Attempts made so far (an attempt cut short by a shutdown is not counted). */
  @Column({ type: 'int', default: 0 }) attempts!: number;

  /** When the job ended: the retry period (CALLBACK_RETRY_SECONDS) counts from here. */
  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;

  @Column({ name: 'last_attempt_at', type: 'timestamptz', nullable: true })
  lastAttemptAt!: Date | null;

  /** The HTTP status of the last answer; null when there was none (refused, timed out). */
  @Column({ name: 'last_http_status', type: 'int', nullable: true })
  lastHttpStatus!: number | null;

  /** Why the last attempt failed; null after a delivery. */
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError!: string | null;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt!: Date | null;
}
