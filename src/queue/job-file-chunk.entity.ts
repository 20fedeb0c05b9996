import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { JobFileEntity } from './job-file.entity';

/**
 * One piece of a job file too large to keep inline (see src/storage/blob-chunks.ts): the file's
 * bytes are the pieces in `seq` order. Deleting the file (or its job) deletes its pieces.
 */
@Entity({ name: 'job_file_chunk' })
export class JobFileChunkEntity {
  @PrimaryColumn({ name: 'file_id', type: 'bigint' }) fileId!: string;

  @PrimaryColumn({ type: 'int' }) seq!: number;

  @ManyToOne(() => JobFileEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'file_id' })
  file?: JobFileEntity;

  @Column({ type: 'bytea' }) data!: Buffer;
}
