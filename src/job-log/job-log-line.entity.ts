import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from '../queue/job.entity';

/**
 * One line R printed while a job ran (GET /jobs/{app}/{jobId}/log), in `seq` order. Written in
 * batches as R prints, so any API node can serve it; deleted with its job (and so its result).
 */
@Entity({ name: 'job_log_line' })
export class JobLogLineEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @PrimaryColumn({ type: 'int' }) seq!: number;

  @ManyToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id' })
  job?: JobEntity;

  /** stdout, stderr, or svc for a line the service wrote (the cap note). */
  @Column({ type: 'varchar', length: 8 }) stream!: string;

  @Column({ name: 'logged_at', type: 'timestamptz' }) loggedAt!: Date;

  @Column({ type: 'text' }) line!: string;
}
