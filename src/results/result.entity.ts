import { Column, Entity, Index, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { JobEntity } from '../queue/job.entity';

/** The one result of a job (the primary key makes a second one impossible). */
@Entity({ name: 'result' })
// Listing an application's results, newest first, is a range scan of this index.
@Index('result_app_time_idx', ['applicationName', 'resultTime', 'jobId'])
@Index('result_time_idx', ['resultTime'])
export class ResultEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @OneToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id' })
  job?: JobEntity;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  @Column({ name: 'result_time', type: 'timestamptz' }) resultTime!: Date;

  @Column({ type: 'boolean' }) success!: boolean;

  /** The data's extension: zip, txt, xml, json. */
  @Column({ type: 'varchar', length: 16 }) type!: string;

  @Column({ name: 'content_type', type: 'varchar', length: 128 }) contentType!: string;

  /** The bytes, when small enough to be inline; empty when chunked. */
  @Column({ type: 'bytea' }) data!: Buffer;

  @Column({ type: 'bigint' }) size!: string;

  /** Hex SHA-256 of data: the strong ETag. */
  @Column({ type: 'varchar', length: 64 }) sha256!: string;

  /** The bytes are in result_chunk, not in data. */
  @Column({ type: 'boolean', default: false }) chunked!: boolean;
}
