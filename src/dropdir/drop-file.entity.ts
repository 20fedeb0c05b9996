import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A file taken from a drop directory's inbox (docs/operations.md#drop-directory): the key that
 * makes its submission idempotent, the job it became and whether that job's result was written
 * to the outbox. The job id is chosen before the job is submitted, so a node that takes over a
 * dead node's claim submits under the same id and cannot make a second job.
 */
@Entity({ name: 'drop_file' })
// The outbox writer looks only at rows whose result is not written yet.
@Index('drop_file_pending_idx', ['applicationName'], { where: 'result_written_at IS NULL' })
export class DropFileEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  /** The claim's id (unique per file taken from the inbox), part of its name in processing/. */
  @PrimaryColumn({ name: 'claim_id', type: 'varchar', length: 64 }) claimId!: string;

  /** The file's name as it was dropped into inbox/. */
  @Column({ name: 'file_name', type: 'varchar', length: 255 }) fileName!: string;

  @Column({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @Column({ name: 'claimed_at', type: 'timestamptz' }) claimedAt!: Date;

  /** Set once the job is stored; a retry then never submits again. */
  @Column({ name: 'submitted_at', type: 'timestamptz', nullable: true }) submittedAt!: Date | null;

  /** Set once the outbox file is written. */
  @Column({ name: 'result_written_at', type: 'timestamptz', nullable: true })
  resultWrittenAt!: Date | null;
}
