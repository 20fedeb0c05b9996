import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import type { ResolvedPackage } from './environment-resolution';
import type { Lockfile } from './renv-lockfile';

/**
 * One environment an application asked for: its lockfile (what svc keeps of it, checked) and
 * what the lockfile resolved to against the allowed sources. Rows are never changed: a new
 * lockfile is a new row, so the application's history is its rows, newest first.
 */
@Entity({ name: 'r_environment' })
@Index('IDX_r_environment_application', ['applicationName', 'id'])
export class REnvironmentEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' }) id!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @Column({ type: 'jsonb' }) lockfile!: Lockfile;

  /** SHA-256 of `lockfile` (lockfileDigest). */
  @Column({ name: 'lockfile_sha256', type: 'char', length: 64 }) lockfileSha256!: string;

  @Column({ type: 'jsonb' }) resolved!: ResolvedPackage[];

  /** SHA-256 of the resolved contents (contentsDigest). */
  @Column({ name: 'contents_sha256', type: 'char', length: 64 }) contentsSha256!: string;

  @Column({ name: 'created_by', type: 'varchar', length: 256 }) createdBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}

/** Which environment an application asked for last: its row's id (the pointer a rollback moves). */
@Entity({ name: 'application_environment' })
export class ApplicationEnvironmentEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @Column({ name: 'requested_id', type: 'bigint' }) requestedId!: string;

  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;
}
