import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from './job.entity';

/**
 * One job waiting for another (a flow's step and a step it needs): the job is queued but not
 * due (run_after 'infinity') until every job it needs has ended (job_wait counts them down), and
 * then reads what they produced under `name`. The statements that end a job count it down in
 * the same statement (queue-needs.ts), so the dependant is released exactly once.
 */
@Entity({ name: 'job_need' })
// The statements that end a job look up its dependants by the job they need.
@Index('job_need_needed_idx', ['neededJobId'])
export class JobNeedEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @PrimaryColumn({ name: 'needed_job_id', type: 'uuid' }) neededJobId!: string;

  /** What the waiting job calls the needed job's result: an argument's, a folder's name. */
  @Column({ type: 'varchar', length: 64 }) name!: string;

  /**
   * The needed job's failure (or cancellation) cancels the waiting one (true), or the waiting one
   * runs without it (false), told so by its missing input.
   */
  @Column({ type: 'boolean' }) required!: boolean;

  /**
   * The needed job's end was counted: a job that ends again (an admin's retry of a failed one)
   * is not counted twice, which would release the waiting job before its other needs end.
   */
  @Column({ type: 'boolean', default: false }) counted!: boolean;

  @ManyToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id', foreignKeyConstraintName: 'job_need_job_fk' })
  job?: JobEntity;

  @ManyToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'needed_job_id', foreignKeyConstraintName: 'job_need_needed_fk' })
  neededJob?: JobEntity;
}
