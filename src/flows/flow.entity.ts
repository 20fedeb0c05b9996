import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from '../queue/job.entity';

/**
 * A flow (docs/flows.md): steps that are jobs, some waiting for others. Its state is its steps'
 * (read from their jobs when it is shown); the row holds what is the flow's own: who submitted
 * it, when, and its cancellation.
 */
@Entity({ name: 'flow' })
export class FlowEntity {
  @PrimaryColumn('uuid') id!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  @Column({ name: 'submitted_at', type: 'timestamptz' }) submittedAt!: Date;

  /** The submitting caller's principal (user:alice); null: anonymous. */
  @Column({ name: 'submitted_by', type: 'varchar', length: 300, nullable: true })
  submittedBy!: string | null;

  /** Set when the flow was cancelled as a whole. */
  @Column({ name: 'cancelled_at', type: 'timestamptz', nullable: true }) cancelledAt!: Date | null;

  @Column({ name: 'cancelled_by', type: 'varchar', length: 256, nullable: true })
  cancelledBy!: string | null;
}

/** A step of a flow: its name, the steps it needs, its failure policy, and the job that runs it. */
@Entity({ name: 'flow_step' })
// A job's flow, for the job's page and a filter of the jobs list.
@Index('flow_step_job_uq', ['jobId'], { unique: true })
export class FlowStepEntity {
  @PrimaryColumn({ name: 'flow_id', type: 'uuid' }) flowId!: string;

  @PrimaryColumn({ type: 'varchar', length: 64 }) name!: string;

  /** Its place in the request's list, which is the order it is shown in. */
  @Column({ type: 'int' }) position!: number;

  /** The names of the steps it needs. */
  @Column({ type: 'jsonb' }) needs!: string[];

  /** What its failure does: `fail` the flow (its dependants are cancelled) or `continue`. */
  @Column({ name: 'on_failure', type: 'varchar', length: 16 }) onFailure!: string;

  @Column({ type: 'int' }) retries!: number;

  /** The job that runs it; null once that job was deleted (its result deleted, retention). */
  @Column({ name: 'job_id', type: 'uuid', nullable: true }) jobId!: string | null;

  @ManyToOne(() => FlowEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'flow_id', foreignKeyConstraintName: 'flow_step_flow_fk' })
  flow?: FlowEntity;

  @ManyToOne(() => JobEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'job_id', foreignKeyConstraintName: 'flow_step_job_fk' })
  job?: JobEntity;
}
