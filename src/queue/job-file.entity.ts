import { Column, Entity, Index, ManyToOne, JoinColumn, PrimaryGeneratedColumn } from 'typeorm';
import { JobEntity } from './job.entity';

/** A data file of a multi-file job, stored with the job so that any worker node can run it. */
@Entity({ name: 'job_file' })
@Index('job_file_job_name_uq', ['jobId', 'name'], { unique: true })
export class JobFileEntity {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;

  @Column({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @ManyToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id' })
  job?: JobEntity;

  @Column({ type: 'varchar', length: 255 }) name!: string;

  /** The bytes, when the file is small enough to be inline; empty when it is chunked. */
  @Column({ type: 'bytea' }) content!: Buffer;

  @Column({ type: 'bigint' }) size!: string;

  /** The bytes are in job_file_chunk, not in content. */
  @Column({ type: 'boolean', default: false }) chunked!: boolean;
}
