import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A token bucket of the submission rates (an application's, or a principal's within it), shared
 * by every API node: one row per bucket, refilled and taken from by one statement
 * (SubmissionLimits).
 */
@Entity({ name: 'submission_bucket' })
export class SubmissionBucketEntity {
  /** `app:<application>` or `principal:<application>:<name>`. */
  @PrimaryColumn({ type: 'varchar', length: 200 }) bucket!: string;

  /** Tokens left at refilled_at; a submission takes one. */
  @Column({ type: 'double precision' }) tokens!: number;

  @Column({ name: 'refilled_at', type: 'timestamptz' }) refilledAt!: Date;

  /** Whether the last submission that looked got its token. */
  @Column({ type: 'boolean' }) granted!: boolean;
}
