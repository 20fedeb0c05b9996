import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { ResultEntity } from './result.entity';

/**
 * One piece of result data too large to keep inline (see src/storage/blob-chunks.ts). Deleting
 * the result (or its job) deletes its pieces.
 */
@Entity({ name: 'result_chunk' })
export class ResultChunkEntity {
  @PrimaryColumn({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @PrimaryColumn({ type: 'int' }) seq!: number;

  @ManyToOne(() => ResultEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'job_id' })
  result?: ResultEntity;

  @Column({ type: 'bytea' }) data!: Buffer;
}
