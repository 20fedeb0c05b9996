import { Column, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from './job.entity';

/**
 * What a job of a flow still waits for, and the reruns it has left. `needs_left` is the one row
 * every ending of a needed job updates: the row lock orders two needed jobs that end together on
 * two nodes, and the later statement sees the earlier's count (READ COMMITTED re-reads an updated
 * row), so exactly one of them sees it reach zero and releases the job.
 */
@Entity({ name: 'job_wait' })
export class JobWaitEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  /** The needed jobs that have not ended yet (those whose failure cancels it are counted too). */
  @Column({ name: 'needs_left', type: 'int' }) needsLeft!: number;

  /** How many more times a failed run (R's error, not the infrastructure's) is run again. */
  @Column({ name: 'retries_left', type: 'int' }) retriesLeft!: number;

  @OneToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id', foreignKeyConstraintName: 'job_wait_job_fk' })
  job?: JobEntity;
}
