import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One line of the audit trail (docs/security.md#audit-trail): written in the same transaction
 * (or statement) as the change it records, never updated; deleted only by retention.
 */
@Entity({ name: 'audit_event' })
// The list filters and pages by time.
@Index('audit_event_time_idx', ['time'])
export class AuditEventEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' }) id!: string;

  @Column({ type: 'timestamptz' }) time!: Date;

  /** The name, or `h:` and its keyed hash with AUDIT_PSEUDONYMIZE; null: anonymous. */
  @Column({ type: 'varchar', length: 256, nullable: true }) principal!: string | null;

  /** user, apiKey, adminUser, commandLine, directory; null: anonymous. */
  @Column({ name: 'auth_method', type: 'varchar', length: 32, nullable: true })
  authMethod!: string | null;

  @Column({ name: 'client_address', type: 'varchar', length: 64, nullable: true })
  clientAddress!: string | null;

  @Column({ name: 'request_id', type: 'varchar', length: 128, nullable: true })
  requestId!: string | null;

  @Column({ type: 'varchar', length: 64 }) action!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64, nullable: true })
  applicationName!: string | null;

  @Column({ name: 'job_id', type: 'uuid', nullable: true }) jobId!: string | null;

  /** success, failure. */
  @Column({ type: 'varchar', length: 16 }) outcome!: string;

  @Column({ type: 'jsonb', nullable: true }) details!: Record<string, unknown> | null;
}
